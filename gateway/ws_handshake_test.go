package gateway

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// handshakeCtx is a GET with the headers of a version 13 upgrade and key.
func handshakeCtx(key string) *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	ctx.Request.Header.SetMethod(fasthttp.MethodGet)
	ctx.Request.SetRequestURI("/v1/stream")
	ctx.Request.Header.Set("Connection", "Upgrade")
	ctx.Request.Header.Set("Upgrade", "websocket")
	ctx.Request.Header.Set("Sec-WebSocket-Version", "13")
	ctx.Request.Header.Set("Sec-WebSocket-Key", key)
	return &ctx
}

// A Sec-WebSocket-Key of any length is checked, never decoded into a nonce
// it does not fit (a 32-character key used to panic).
func TestWSHandshakeKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"dGhlIHNhbXBsZSBub25jZQ==", true},
		{"", false},
		{"dGhlIHNhbXBsZSBub25jZQ=", false},
		{"dGhlIHNhbXBsZSBub25jZQ===", false},
		{"dGhlIHNhbXBsZSBub25jZQ==AAAAAAAA", false},
		{"AAAAAAAAAAAAAAAAAAAAAAAA", false}, // 18 bytes, not 16
		{"dGhlIHNhbXBsZSBub25jZQ!!", false},
		{strings.Repeat("A", 4096), false},
	} {
		if got := isWebSocketHandshake(handshakeCtx(tc.key)); got != tc.want {
			t.Errorf("key %.40q: %v, want %v", tc.key, got, tc.want)
		}
	}
}

// The handshake with a malformed key of any length is 400 invalid_request,
// not a panic (a 500 with a stack trace).
func TestWSHandshakeLongKey(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	for _, key := range []string{strings.Repeat("QUJD", 12), "QUJD", strings.Repeat("A", 2000)} {
		r := ss.do("GET", "/stream", ss.key, nil, "Connection", "Upgrade", "Upgrade", "websocket",
			"Sec-WebSocket-Version", "13", "Sec-WebSocket-Key", key)
		r.failure(t, 400, control.EInvalidRequest)
	}
}

// Seeds in testdata/fuzz/FuzzWSHandshakeKey; `go test -fuzz=FuzzWSHandshakeKey
// ./gateway` explores further.
func FuzzWSHandshakeKey(f *testing.F) {
	f.Add("dGhlIHNhbXBsZSBub25jZQ==")
	f.Fuzz(func(t *testing.T, key string) {
		ok := isWebSocketHandshake(handshakeCtx(key))
		if ok && len(key) != 24 {
			t.Fatalf("key of %d characters accepted", len(key))
		}
	})
}

// chargeCounter counts the charges a meter is asked for.
type chargeCounter struct {
	control.Meter
	charges atomic.Int64
}

func (m *chargeCounter) Charge(ctx context.Context, ws *control.Workspace, chars int64) (control.Charge, int64, error) {
	m.charges.Add(1)
	return m.Meter.Charge(ctx, ws, chars)
}

// The handshake's balance check only reads: an exhausted workspace is
// refused 402 without a charge being tried (it used to charge and refund a
// character to find out).
func TestWSBalanceCheckReadsOnly(t *testing.T) {
	var m chargeCounter
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce, meter: &m})
	m.Meter = control.NewMeter(ss.store, control.BillingEnforce)
	zero := int64(0)
	if _, err := ss.store.UpdateWorkspace(context.Background(), ss.ws.ID, control.WorkspaceUpdate{Allowance: &zero}); err != nil {
		t.Fatal(err)
	}
	waitFor(5*time.Second, func() bool {
		_, r, _ := ss.wsDial("", wsKey(ss.key))
		return r != nil && r.StatusCode == 402
	})
	m.charges.Store(0)
	_, r, err := ss.wsDial("", wsKey(ss.key))
	if err == nil || r == nil || r.StatusCode != 402 {
		t.Fatalf("handshake with nothing left: %v %v", err, r)
	}
	if n := m.charges.Load(); n != 0 {
		t.Fatalf("the handshake tried %d charges", n)
	}
}
