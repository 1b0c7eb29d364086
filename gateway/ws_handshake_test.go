package gateway

import (
	"strings"
	"testing"

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
