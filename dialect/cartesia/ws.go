package cartesia

import (
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/web"
)

// GET /tts/websocket: Cartesia's realtime socket. The handshake takes
// Cartesia's credentials (authenticate: headers, or the query's api_key
// or access_token from a browser); the host checks the handshake, admits
// the session with the core (one concurrency slot for the socket, as the
// native WebSocket) and upgrades; the session is package sessions, speaking
// Cartesia through wire (wire.go).
func (c *Protocol) registerWebSocket(h web.Host, path string, root bool) {
	h.Handle(web.Route{Method: "GET", Path: path, Root: root, Scope: control.ScopeTTS, Auth: c.authenticate,
		Streams: true}, c.webSocket)
}

func (c *Protocol) webSocket(ctx *fasthttp.RequestCtx, p *control.Principal) {
	requestID := string(web.RequestID(ctx))
	c.h.Upgrade(ctx, p, nil, func(conn *websocket.Conn, env web.SessionEnv) web.Session {
		return sessions.New(conn, c.cfg.Session, web.SessionDeps(c.h, env, newWire(requestID)))
	})
}
