package synth

import (
	"testing"

	"voicesvc/control"
)

// A key's cache record carries its principal exactly, and is refused when
// stale, revoked, expired, for another hash, or cut short.
func TestKeyRecordRoundTrip(t *testing.T) {
	c := &keyCache{ttl: 60_000, negTTL: 1000}
	secret, hash := control.NewAPIKeySecret()
	if !control.ValidAPIKeyFormat(secret) || len(secret) != 44 {
		t.Fatalf("secret %q", secret)
	}
	var h [32]byte
	copy(h[:], hash)
	conc := 3
	k := &control.APIKey{ID: control.NewID(), WorkspaceID: control.NewID(), Hash: hash,
		Scopes: []string{control.ScopeTTS, control.ScopeClone}, ExpiresAt: 5_000}
	ws := &control.Workspace{ID: k.WorkspaceID, Plan: "starter", Billing: control.BillingMeter, Concurrency: &conc}
	rec := encodeKey(k, ws, control.BillingEnforce, 1000)
	p, ok, err := c.decode(rec, &h, 2000)
	if !ok || err != nil {
		t.Fatalf("decode: %v %v", ok, err)
	}
	want := control.Principal{WorkspaceID: ws.ID, KeyID: k.ID, Scopes: control.ScopeBitTTS | control.ScopeBitClone, ExpiresAt: 5000, Plan: "starter",
		Limits: control.Limits{Concurrency: 3, RPS: 0, Sessions: 4, MonthlyChars: 100_000, Streaming: true, Billing: "meter"}}
	if *p != want {
		t.Errorf("principal %+v\nwant      %+v", *p, want)
	}
	if !p.Has(control.ScopeTTS) || p.Has(control.ScopeVoicesRead) {
		t.Errorf("scopes %b", p.Scopes)
	}
	if _, ok, err := c.decode(rec, &h, 6000); !ok || err != errKeyExpired {
		t.Errorf("expired: %v %v", ok, err)
	}
	if _, ok, _ := c.decode(rec, &h, 1000+60_000); ok {
		t.Errorf("stale record trusted")
	}
	k.RevokedAt = 1
	if _, ok, err := c.decode(encodeKey(k, ws, "", 1000), &h, 6000); !ok || err != errUnauthorized {
		t.Errorf("revoked: %v %v", ok, err)
	}
	other := h
	other[0] ^= 1
	if _, ok, _ := c.decode(rec, &other, 2000); ok {
		t.Errorf("record accepted for another hash")
	}
	for n := 0; n < len(rec); n++ {
		c.decode(rec[:n], &h, 2000) // must not panic
	}
	if p, ok, err := c.decode(unknownRecord(1000), &h, 1500); p != nil || !ok || err != nil {
		t.Errorf("negative entry: %v %v %v", p, ok, err)
	}
}
