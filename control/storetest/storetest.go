// Package storetest is the one test suite every control.Store runs: the
// SQLite and Postgres packages call Run from their tests with a function
// that opens a fresh, empty store.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
)

// Run runs every store test; open must return a new empty store and arrange
// for it to be closed when t ends.
func Run(t *testing.T, open func(t *testing.T) control.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s control.Store)
	}{
		{"Ping", testPing},
		{"Workspace", testWorkspace},
		{"APIKey", testAPIKey},
		{"Token", testToken},
		{"TokenConcurrentConsume", testTokenConcurrent},
		{"Voice", testVoice},
		{"ListVoices", testListVoices},
		{"SeedCatalog", testSeedCatalog},
		{"VoiceAliases", testVoiceAliases},
		{"VoiceAliasesConcurrent", testVoiceAliasesConcurrent},
		{"AliasChangeFeed", testAliasChangeFeed},
		{"Enrollment", testEnrollment},
		{"JobLifecycle", testJobLifecycle},
		{"JobLeaseExpiry", testJobLeaseExpiry},
		{"DeleteVoiceCancelsJobs", testDeleteVoiceCancels},
		{"ExpireJobs", testExpireJobs},
		{"ClaimJobConcurrent", testClaimConcurrent},
		{"Charge", testCharge},
		{"ChargeConcurrent", testChargeConcurrent},
		{"Refund", testRefund},
		{"Idempotency", testIdempotency},
		{"IdempotencyConcurrent", testIdempotencyConcurrent},
		{"ChangeFeed", testChangeFeed},
		{"LoginLink", testLoginLink},
		{"LoginLinkConcurrent", testLoginLinkConcurrent},
		{"DashboardSession", testDashboardSession},
		{"ListAPIKeys", testListAPIKeys},
		{"DailyUsage", testDailyUsage},
		{"LeaseSlots", testLeaseSlots},
		{"LeaseExpiry", testLeaseExpiry},
		{"SettleBilling", testSettleBilling},
		{"LeaseRequests", testLeaseRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// WatchWithin starts watching w, runs change, and fails t unless a change
// matching (kind, id) is delivered within the 2-second contract. The
// packages use it with two handles on one database.
func WatchWithin(t *testing.T, w control.ChangeFeed, kind, id string, change func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	got := make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() {
		var once sync.Once
		done <- w.WatchChanges(ctx, func(c control.Change) {
			if c.Kind == kind && c.ID == id {
				once.Do(func() { close(got) })
			}
		})
	}()
	// WatchChanges delivers changes after the call started; give it a moment
	// to take its starting position before changing.
	time.Sleep(100 * time.Millisecond)
	change()
	select {
	case <-got:
	case <-time.After(2 * time.Second):
		t.Errorf("change %s %s not delivered within 2s", kind, id)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("WatchChanges returned %v, want context.Canceled", err)
	}
}

func testPing(t *testing.T, s control.Store) {
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func testChangeFeed(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	k := mustKey(t, s, ws.ID)
	WatchWithin(t, s, "key", k.ID, func() {
		if _, err := s.RevokeAPIKey(ctx, k.ID, control.NowMS()); err != nil {
			t.Fatal(err)
		}
	})
	WatchWithin(t, s, "workspace", ws.ID, func() {
		if _, err := s.UpdateWorkspace(ctx, ws.ID, control.WorkspaceUpdate{Plan: ptr("pro")}); err != nil {
			t.Fatal(err)
		}
	})
}

func testWorkspace(t *testing.T, s control.Store) {
	ctx := t.Context()
	w := &control.Workspace{Name: "acme", Plan: "starter"}
	if err := s.CreateWorkspace(ctx, w); err != nil {
		t.Fatal(err)
	}
	if !control.ValidID(w.ID) || w.CreatedAt == 0 {
		t.Fatalf("id/timestamps not filled: %+v", w)
	}
	got, err := s.GetWorkspace(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "acme" || got.Plan != "starter" || got.Streaming != nil || got.Allowance != nil || got.RPS != nil {
		t.Fatalf("got %+v", got)
	}
	_, err = s.GetWorkspace(ctx, control.NewID())
	wantCode(t, err, control.ENotFound)
	_, err = s.UpdateWorkspace(ctx, control.NewID(), control.WorkspaceUpdate{Plan: ptr("pro")})
	wantCode(t, err, control.ENotFound)

	upd := control.WorkspaceUpdate{Plan: ptr("pro"), Billing: ptr(control.BillingMeter), Streaming: ptr(false),
		Allowance: ptr(int64(1234)), Credits: ptr(int64(55)), Used: ptr(int64(77)),
		Concurrency: ptr(7), RPS: ptr(0), Sessions: ptr(3)}
	if _, err := s.UpdateWorkspace(ctx, w.ID, upd); err != nil {
		t.Fatal(err)
	}
	got, err = s.GetWorkspace(ctx, w.ID)
	if err != nil {
		t.Fatal(err)
	}
	l := got.Limits(control.BillingEnforce)
	want := control.Limits{Concurrency: 7, RPS: 0, Sessions: 3, MonthlyChars: 1234, Streaming: false, Billing: control.BillingMeter}
	if l != want || got.Credits != 55 || got.Plan != "pro" {
		t.Fatalf("limits %+v credits %d, want %+v 55", l, got.Credits, want)
	}
	bal, err := s.Balance(ctx, w.ID, control.Month(time.Now()), 1234)
	if err != nil {
		t.Fatal(err)
	}
	if bal != (control.Balance{Allowance: 1234, Used: 77, Credits: 55}) {
		t.Fatalf("balance %+v", bal)
	}
	// A second update leaves the fields it does not name alone.
	if _, err := s.UpdateWorkspace(ctx, w.ID, control.WorkspaceUpdate{Credits: ptr(int64(1))}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetWorkspace(ctx, w.ID)
	if got.Credits != 1 || got.Allowance == nil || *got.Allowance != 1234 || got.Plan != "pro" {
		t.Fatalf("after partial update %+v", got)
	}
}

func testAPIKey(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	k := &control.APIKey{WorkspaceID: ws.ID, Hash: hash("secret"), Scopes: []string{control.ScopeTTS}, ExpiresAt: 99}
	if err := s.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetAPIKeyByHash(ctx, hash("secret"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != k.ID || got.WorkspaceID != ws.ID || !got.HasScope(control.ScopeTTS) || got.HasScope(control.ScopeClone) ||
		got.ExpiresAt != 99 || got.Legacy || !bytes.Equal(got.Hash, hash("secret")) {
		t.Fatalf("got %+v", got)
	}
	if err := s.CreateAPIKey(ctx, &control.APIKey{WorkspaceID: ws.ID, Hash: hash("secret")}); err == nil {
		t.Fatal("duplicate hash accepted")
	}
	legacy := &control.APIKey{WorkspaceID: ws.ID, Hash: hash("legacy"), Scopes: control.AllScopes, Legacy: true}
	if err := s.CreateAPIKey(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetAPIKeyByHash(ctx, hash("legacy")); got == nil || !got.Legacy || len(got.Scopes) != 4 {
		t.Fatalf("legacy %+v", got)
	}
	_, err = s.GetAPIKeyByHash(ctx, hash("nope"))
	wantCode(t, err, control.ENotFound)

	r, err := s.RevokeAPIKey(ctx, k.ID, 1000)
	if err != nil || r.RevokedAt != 1000 {
		t.Fatalf("revoke: %v %+v", err, r)
	}
	if r, err := s.RevokeAPIKey(ctx, k.ID, 2000); err != nil || r.RevokedAt != 1000 {
		t.Fatalf("second revoke must keep the first time: %v %+v", err, r)
	}
	_, err = s.RevokeAPIKey(ctx, control.NewID(), 1)
	wantCode(t, err, control.ENotFound)

	// By id: what a token's creating key is checked through, revocation included.
	byID, err := s.GetAPIKey(ctx, k.ID)
	if err != nil || byID.ID != k.ID || byID.RevokedAt != 1000 || !bytes.Equal(byID.Hash, hash("secret")) {
		t.Fatalf("GetAPIKey: %v %+v", err, byID)
	}
	_, err = s.GetAPIKey(ctx, control.NewID())
	wantCode(t, err, control.ENotFound)
}

func testToken(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	k := mustKey(t, s, ws.ID)
	now := control.NowMS()
	tok := &control.AccessToken{Hash: hash("tok"), WorkspaceID: ws.ID, KeyID: k.ID, VoiceIDs: []string{"a", "b"}, ExpiresAt: now + 60_000}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetTokenByHash(ctx, hash("tok"))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tok.ID || got.KeyID != k.ID || len(got.VoiceIDs) != 2 || got.VoiceIDs[1] != "b" || got.ConsumedAt != 0 {
		t.Fatalf("got %+v", got)
	}
	_, err = s.GetTokenByHash(ctx, hash("unknown"))
	wantCode(t, err, control.ETokenInvalid)

	expired := &control.AccessToken{Hash: hash("old"), WorkspaceID: ws.ID, KeyID: k.ID, ExpiresAt: now - 1}
	if err := s.CreateToken(ctx, expired); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		hash []byte
		code string
	}{
		{"first use", hash("tok"), ""},
		{"second use", hash("tok"), control.ETokenInvalid},
		{"expired", hash("old"), control.ETokenInvalid},
		{"unknown", hash("unknown"), control.ETokenInvalid},
	}
	for _, tt := range tests {
		err := s.ConsumeToken(ctx, tt.hash, now)
		if tt.code == "" && err != nil || tt.code != "" && !control.IsCode(err, tt.code) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.code)
		}
	}
	if got, _ := s.GetTokenByHash(ctx, hash("tok")); got == nil || got.ConsumedAt != now {
		t.Fatalf("consumed_at not recorded: %+v", got)
	}
}

func testTokenConcurrent(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	k := mustKey(t, s, ws.ID)
	now := control.NowMS()
	if err := s.CreateToken(ctx, &control.AccessToken{Hash: hash("race"), WorkspaceID: ws.ID, KeyID: k.ID, ExpiresAt: now + 60_000}); err != nil {
		t.Fatal(err)
	}
	var ok, invalid atomic.Int32
	parallel(50, func(int) {
		err := s.ConsumeToken(ctx, hash("race"), now)
		switch {
		case err == nil:
			ok.Add(1)
		case control.IsCode(err, control.ETokenInvalid):
			invalid.Add(1)
		default:
			t.Errorf("consume: %v", err)
		}
	})
	if ok.Load() != 1 || invalid.Load() != 49 {
		t.Fatalf("%d successes, %d token_invalid; want 1 and 49", ok.Load(), invalid.Load())
	}
}

// parallel runs fn(0..n-1) in n goroutines released together.
func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			fn(i)
		}()
	}
	close(start)
	wg.Wait()
}

func mustWorkspace(t *testing.T, s control.Store, plan string) *control.Workspace {
	t.Helper()
	w := &control.Workspace{Name: "ws", Plan: plan}
	if err := s.CreateWorkspace(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func mustKey(t *testing.T, s control.Store, ws string) *control.APIKey {
	t.Helper()
	k := &control.APIKey{WorkspaceID: ws, Hash: hash(control.NewID()), Scopes: control.AllScopes}
	if err := s.CreateAPIKey(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	return k
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func ptr[T any](v T) *T { return &v }

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if !control.IsCode(err, code) {
		t.Fatalf("got error %v, want code %q", err, code)
	}
}
