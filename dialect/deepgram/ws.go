package deepgram

import (
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/web"
)

// GET {base}/v1/speak: the speak socket (wire.go). The handshake is
// checked before the upgrade, so that a bad query or an unknown model is
// an HTTP answer in Deepgram's shape, as the vendor's: the query by the
// core's rules (synth.ParseDeepgramSocket), the model by the core's voice
// lookup. The host then admits the session (slot, balance, open
// sessions) and upgrades, selecting the scheme a browser offered as its
// subprotocol ("token" or "bearer", with the credential after it).

// subprotocols the 101 may select: the credential's scheme the client
// offered (Node's ws fails a handshake that offered subprotocols and got
// none back).
var subprotocols = []string{"token", "bearer"}

func (d *Protocol) registerSocket(h web.Host) {
	h.Handle(web.Route{Method: "GET", Path: base + speakPath, Scope: control.ScopeTTS, Auth: d.authenticate,
		Streams: true}, d.socket)
}

func (d *Protocol) socket(ctx *fasthttp.RequestCtx, p *control.Principal) {
	q := query(ctx.QueryArgs())
	in, err := synth.ParseDeepgramSocket(&q)
	if err != nil {
		d.h.WriteError(ctx, err)
		return
	}
	v, err := d.h.Core().Voice(ctx, p, in.Model)
	if err != nil {
		d.h.WriteError(ctx, modelError(err, in.Model))
		return
	}
	if in.Options.Language == "" {
		// The session opens contexts in a language it knows: the
		// voice's own, as a speak request's default.
		in.Options.Language = v.PrimaryLanguage
	}
	w := &wire{model: in.Model, voiceID: v.ID, requestID: string(web.RequestID(ctx)), options: in.Options}
	d.h.Upgrade(ctx, p, subprotocols, func(conn *websocket.Conn, env web.SessionEnv) web.Session {
		return sessions.New(conn, d.cfg.Session, web.SessionDeps(d.h, env, w))
	})
}
