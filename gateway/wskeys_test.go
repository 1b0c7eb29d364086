package gateway

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A handshake with two Sec-WebSocket-Key headers is ambiguous (RFC 6455
// 4.2.1: exactly one): 400 invalid_request, not 101 with either key.
func TestWSHandshakeDuplicateKey(t *testing.T) {
	const k1, k2 = "dGhlIHNhbXBsZSBub25jZQ==", "AAAAAAAAAAAAAAAAAAAAAA=="
	for _, keys := range [][]string{{k1, k2}, {k1, k1}} {
		ctx := handshakeCtx(keys[0])
		ctx.Request.Header.Add("Sec-WebSocket-Key", keys[1])
		if isWebSocketHandshake(ctx) {
			t.Errorf("keys %q: accepted as a handshake", keys)
		}
	}
	if !isWebSocketHandshake(handshakeCtx(k1)) {
		t.Fatal("one key: refused")
	}

	ss := newSynthServer(t, synthOpts{})
	for _, keys := range [][]string{{k1, k2}, {k1, k1}} {
		c, err := net.Dial("tcp", strings.TrimPrefix(ss.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		req := "GET " + APIRoot + "/stream HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
			"Sec-WebSocket-Version: 13\r\nX-API-Key: " + ss.key + "\r\n" +
			"Sec-WebSocket-Key: " + keys[0] + "\r\nSec-WebSocket-Key: " + keys[1] + "\r\n\r\n"
		if _, err := c.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("keys %q: status %d, want 400", keys, resp.StatusCode)
		}
	}
}
