package sessions

import "github.com/fasthttp/websocket"

// disconnect is how a session ends toward its client: the close code it
// sends and why (centrifuge's Disconnect). A session that is not ending has
// none (nil).
type disconnect struct {
	code   int    // the close frame's code; 0: none is sent (the socket is gone)
	reason string // for the log
}

// The ways a session ends (docs/realtime.md#close-codes).
var (
	disconnectNormal       = &disconnect{websocket.CloseNormalClosure, "session ended"}
	disconnectShutdown     = &disconnect{websocket.CloseGoingAway, "server shutting down"}
	disconnectInvalidUTF8  = &disconnect{websocket.CloseInvalidFramePayloadData, "text frame is not UTF-8"}
	disconnectCredits      = &disconnect{websocket.ClosePolicyViolation, "insufficient credits"}
	disconnectNotReading   = &disconnect{websocket.ClosePolicyViolation, "the client does not read"}
	disconnectTooBig       = &disconnect{websocket.CloseMessageTooBig, "message over the size limit"}
	disconnectProtocol     = &disconnect{websocket.CloseProtocolError, "the client broke the WebSocket protocol"}
	disconnectInternal     = &disconnect{websocket.CloseInternalServerErr, "internal error"}
	disconnectTryLater     = &disconnect{websocket.CloseTryAgainLater, "engine unavailable"}
	disconnectUnauthorized = &disconnect{4401, "credentials revoked or expired: do not reconnect"}
	// disconnectBroken: a write to the client failed, so no close frame.
	disconnectBroken = &disconnect{0, "write to the client failed"}
	// disconnectGone: the client went away (EOF or its close), nothing to send.
	disconnectGone = &disconnect{0, "client gone"}
)

// echo answers the client's own close frame with its code.
func echo(code int) *disconnect { return &disconnect{code, "client closed"} }
