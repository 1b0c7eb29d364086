// Package native is voicesvc's own protocol (docs/api.md, docs/realtime.md):
// speak (one audio file), server-sent events, the realtime WebSocket, and
// the resources (voices and their aliases, jobs, enroll and clone, tokens,
// keys, usage, media previews, the dashboard's pages, /docs/). It only
// translates: bodies are decoded here and checked with the core's rules
// (synth.ParseSpeak, ParseStream, VoiceCreate, CheckClip, ...), the core
// decides voices, access, limits and billing, and the host (package
// gateway) authenticates, bounds the bodies and streams the answer. The
// WebSocket's sessions are package sessions.
package native

import (
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// Config tunes the native protocol; zero fields take the defaults.
type Config struct {
	// SSEChunk is the audio per SSE chunk event after the first, which
	// leaves at once; 0: synth.DefaultCoalesce (40 ms).
	SSEChunk time.Duration
	// Session configures the realtime sessions.
	Session sessions.Config
	// UploadDir holds the uploads' temporary files (unlinked at once, so
	// nothing stays there); "": the system's temporary directory.
	UploadDir string
}

// Protocol is the native protocol's routes.
type Protocol struct {
	cfg Config
	h   web.Host
	// Series resolved once at registration: no label lookup per request.
	speak, sse *telemetry.Series
}

// New returns the native protocol.
func New(cfg Config) *Protocol { return &Protocol{cfg: cfg} }

var _ web.Protocol = (*Protocol)(nil)

func (*Protocol) Dialect() string    { return telemetry.Native }
func (*Protocol) Prefixes() []string { return nil } // the envelope is the server's default

// AppendError writes the envelope of docs/api.md#envelope (or the flat
// billing body).
func (*Protocol) AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	return web.AppendEnvelopeError(b, ctx, e, status)
}

// Register adds speak, SSE and the WebSocket (access tokens work on all
// three; speak takes an Idempotency-Key), and the resources: voices and
// their aliases, jobs, enroll and clone, tokens, keys, usage, media.
func (n *Protocol) Register(h web.Host) {
	n.h = h
	n.speak, n.sse = h.Series(telemetry.Speak), h.Series(telemetry.SSE)
	h.Handle(web.Route{Method: "POST", Path: "/voices/{id}/speak", Scope: control.ScopeTTS, Creds: web.Tokens,
		Idempotent: true, Streams: true}, n.speakHandler)
	h.Handle(web.Route{Method: "POST", Path: "/voices/{id}/stream", Scope: control.ScopeTTS, Creds: web.Tokens,
		Streams: true}, n.stream)
	n.registerWebSocket(h)
	n.registerVoices(h)
	n.registerClone(h)
	n.registerKeys(h)
	n.registerDashboard(h)
	n.registerDocs(h)
}

// pathID is the {id} of the route: a voice id or name. It points into
// the request and must not be kept past the handler.
func pathID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("id").(string)
	return id
}
