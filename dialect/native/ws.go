package native

import (
	"bytes"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/web"
)

// GET {api_root}/stream: the realtime WebSocket (docs/realtime.md). The
// handshake's credentials come in its own forms (wsAuthenticate); the host
// checks the handshake, admits the session with the core and upgrades
// (web.Host.Upgrade); the session itself is package sessions, over the
// core's voice lookup and the admission's billing.

// subprotocol is the versioned subprotocol; a client that sends its token
// as a second subprotocol gets this one selected.
const subprotocol = "service.v1"

var (
	hdrAPIKey       = []byte("X-API-Key")
	hdrDeprecation  = []byte("Deprecation")
	valDeprecated   = []byte("true")
	hdrWSProtocol   = []byte("Sec-WebSocket-Protocol")
	argAccessToken  = []byte("access_token")
	argAPIKey       = []byte("api_key")
	errUnauthorized = control.Errorf(control.EUnauthorized, "missing or invalid API key")
	subprotocols    = []string{subprotocol}
)

func (n *Protocol) registerWebSocket(h web.Host) {
	h.Handle(web.Route{Method: "GET", Path: "/stream", Scope: control.ScopeTTS, Auth: n.wsAuthenticate,
		Streams: true}, n.webSocket)
}

func (n *Protocol) webSocket(ctx *fasthttp.RequestCtx, p *control.Principal) {
	n.h.Upgrade(ctx, p, subprotocols, n.openSession)
}

// openSession makes the native session of an upgraded socket.
func (n *Protocol) openSession(conn *websocket.Conn, env web.SessionEnv) web.Session {
	return sessions.New(conn, n.cfg.Session, web.SessionDeps(n.h, env, nil))
}

// wsAuthenticate finds the credentials of a handshake in the order of the
// docs: X-API-Key; the subprotocol list ["service.v1", token];
// access_token; the deprecated api_key query parameter, whose responses
// carry a Deprecation header. The first form present decides: a bad one is
// 401 (token_invalid for tokens), never a fall-through to the next.
func (n *Protocol) wsAuthenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	q := ctx.QueryArgs()
	switch {
	case len(ctx.Request.Header.PeekBytes(hdrAPIKey)) > 0:
		return n.h.AuthKey(ctx.Request.Header.PeekBytes(hdrAPIKey))
	case len(protocolToken(ctx.Request.Header.PeekBytes(hdrWSProtocol))) > 0:
		return n.h.AuthToken(protocolToken(ctx.Request.Header.PeekBytes(hdrWSProtocol)))
	case len(q.PeekBytes(argAccessToken)) > 0:
		return n.h.AuthToken(q.PeekBytes(argAccessToken))
	case len(q.PeekBytes(argAPIKey)) > 0:
		ctx.Response.Header.SetCanonical(hdrDeprecation, valDeprecated)
		return n.h.AuthKey(q.PeekBytes(argAPIKey))
	}
	return nil, errUnauthorized
}

// protocolToken returns the credential of a `Sec-WebSocket-Protocol:
// service.v1, <token>` list: the first item other than service.v1, when
// service.v1 is offered too.
func protocolToken(h []byte) []byte {
	var tok []byte
	found := false
	for len(h) > 0 {
		item := h
		if i := bytes.IndexByte(h, ','); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		item = bytes.TrimSpace(item)
		switch {
		case string(item) == subprotocol:
			found = true
		case tok == nil && len(item) > 0:
			tok = item
		}
	}
	if !found {
		return nil
	}
	return tok
}
