package gateway

import "github.com/valyala/fasthttp"

// oneWSKey reports whether the handshake carries exactly one
// Sec-WebSocket-Key (RFC 6455 4.2.1). fasthttp keeps repeated headers and
// Peek returns the first: a second key would otherwise go unseen, and the
// answer's Sec-WebSocket-Accept would be for a key the client may not have
// meant.
func oneWSKey(h *fasthttp.RequestHeader) bool {
	return len(h.PeekAll(string(hdrWSKey))) == 1
}
