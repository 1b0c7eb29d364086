// Package web is the seam between the HTTP server (package gateway) and
// the protocol packages (dialect/...): what a protocol registers with the
// server, and what it may ask of it. A protocol package translates its
// wire shapes to and from the application core (synth.Service) and leaves
// everything else to the Host: credentials, the request rate, request ids,
// CORS, metrics, logs, traces, the streaming of audio bodies, WebSocket
// upgrades and shutdown. It holds no rule about access, limits, billing or
// validation: those are the core's.
//
// Adding a protocol: a package with a type implementing Protocol, whose
// Register lists its routes on the Host it is given; gateway.New takes it
// in Deps.Protocols. Its errors (on its routes, and on unknown paths under
// its Prefix) take the shape its AppendError writes.
package web

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/netpoll"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/telemetry"
)

// Handler is an authenticated handler: p has the route's scope and passed
// the workspace's request rate. It ends in exactly one answer (an audio
// body, JSON, or Host.WriteError) and must not keep ctx after it returns.
// p belongs to this request alone, so a stream writer may keep it.
// On a FirstMessage route p may be nil, for Host.Upgrade.
type Handler func(ctx *fasthttp.RequestCtx, p *control.Principal)

// Creds are the credentials a route takes besides an API key in X-API-Key.
type Creds uint8

const (
	// KeysOnly: X-API-Key (and the dashboard's session cookie).
	KeysOnly Creds = iota
	// Tokens: also `Authorization: Bearer vst_...` access tokens.
	Tokens
	// BearerKeys: also `Authorization: Bearer vsk_...` API keys, and no
	// cookie (third-party clients send their key so).
	BearerKeys
	// SessionOnly: the dashboard's session cookie alone; a key or a token
	// is 403 (key management).
	SessionOnly
)

// Route is one route of a protocol.
type Route struct {
	Method string
	// Path is under the API root ("/voices/{id}/speak"); with Root, at the
	// host's root instead. A route without Scope takes no credentials.
	Path  string
	Root  bool
	Scope string // control.Scope*
	// CORS: a Root route answers with CORS headers (API routes always
	// do). Name labels its metrics and logs; "": "METHOD PATH".
	CORS  bool
	Name  string
	Creds Creds
	// Idempotent: an Idempotency-Key replays the first answer (the
	// handler must then answer with a whole body, not a stream).
	Idempotent bool
	// Upload: the body is not read before the handler, which reads it
	// with Host.UploadBody (the server's upload size and time limits).
	// Fingerprint then hashes it for Idempotent: it may read the body
	// itself, once per request, and keep what it read for the handler.
	Upload      bool
	Fingerprint func(ctx *fasthttp.RequestCtx, p *control.Principal) ([]byte, error)
	// Streams: the answer is written while audio is generated, for longer
	// than the server's write timeout (each write is bounded instead).
	Streams bool
	// Auth, when set, finds the principal itself (a protocol's own
	// credential forms, e.g. a WebSocket's query or subprotocol); the
	// route's scope and the request rate are still checked by the host.
	Auth func(ctx *fasthttp.RequestCtx) (*control.Principal, error)
	// FirstMessage, on a WebSocket route with Auth, lets a handshake whose
	// Auth error wraps sessions.ErrNoCredentials go on with a nil
	// principal (the request rate unchecked); Host.Upgrade then
	// authenticates and admits by the first message.
	FirstMessage *sessions.FirstMessage
}

// Protocol is a protocol package as the server holds it.
type Protocol interface {
	// Dialect names it in metrics and logs ("native", "openai", ...).
	Dialect() string
	// Prefix is the path under the API root that its routes share
	// ("/compat/openai"); unknown paths under it answer its 404. "": none.
	Prefixes() []string
	// Register adds its routes.
	Register(h Host)
	// AppendError writes err's body in the protocol's shape; status is the
	// one the server answers with (from the code, control/error.go).
	AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte
}

// Host is the HTTP server as a protocol sees it. Its methods are safe for
// concurrent use; each Protocol gets its own (its routes carry its dialect
// and error shape).
type Host interface {
	// Core is the application core every synthesis goes through.
	Core() *synth.Service
	Logger() *slog.Logger
	// Handle registers a route.
	Handle(r Route, h Handler)
	// WriteError answers err in the protocol's shape, with the status and
	// Retry-After of its code; errors that are not *control.Error are
	// logged and answered as internal (or store_unavailable).
	WriteError(ctx *fasthttp.RequestCtx, err error)
	// Series are the protocol's metrics for one transport; resolve them
	// once, at registration (the answers below take them).
	Series(transport string) *telemetry.Series

	// Begin is Prepare then Admit: the job of voiceRef admitted, or nil
	// with the refusal answered. Every synthesis handler starts so.
	Begin(ctx *fasthttp.RequestCtx, p *control.Principal, voiceRef string, o synth.Options, streaming bool) *Job
	// Prepare asks the core for the job of voiceRef (Service.Prepare),
	// traced; Admit admits it and answers a refusal (false).
	Prepare(ctx *fasthttp.RequestCtx, p *control.Principal, voiceRef string, o synth.Options) (*Job, error)
	Admit(ctx *fasthttp.RequestCtx, p *control.Principal, job *Job, streaming bool) bool
	// RespondAudio answers an admitted job with its audio: buffered whole
	// (then a failure is still an error status) or streamed as the engine
	// yields it. setHeaders describes the audio; it runs last for a
	// buffered body, and may rewrite it.
	RespondAudio(ctx *fasthttp.RequestCtx, job *Job, series *telemetry.Series, buffered bool, setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline))
	// Buffered runs job whole into the body, then calls setHeaders; a
	// failure answers an error.
	Buffered(ctx *fasthttp.RequestCtx, job *Job, series *telemetry.Series, setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline))
	// Stream runs job on a goroutine of its own with run writing its own
	// framing, and makes the stream ctx's body once run has flushed its
	// first bytes (false: run failed before any, and the error is
	// answered). headers are set before the body starts.
	Stream(ctx *fasthttp.RequestCtx, job *Job, series *telemetry.Series, run StreamFunc, headers func(*fasthttp.RequestCtx)) bool
	// Cause is err, or shutting_down when the server's grace period cut
	// the stream (an error event or frame should say so).
	Cause(ctx context.Context, err error) error

	// Authenticate resolves an API key or an access token the protocol
	// found in its own credential forms (no scope check).
	AuthKey(key []byte) (*control.Principal, error)
	AuthToken(token []byte) (*control.Principal, error)
	// AllowRequest counts a request that a protocol authenticated itself
	// (Route.Auth does this for routes).
	AllowRequest(ctx *fasthttp.RequestCtx, p *control.Principal) error
	// Session is the dashboard's live session of the request's cookie
	// (SessionCookie; 401 without one); SameOrigin reports that the
	// request's Origin is the service's own; SetSessionCookie hands the
	// browser its session secret ("": forget it) until expires.
	Session(ctx *fasthttp.RequestCtx) (*control.DashboardSession, error)
	SameOrigin(ctx *fasthttp.RequestCtx) bool
	SetSessionCookie(ctx *fasthttp.RequestCtx, secret string, expires int64)

	// UploadBody is the body of an Upload route, read as it arrives: an
	// announced or actual size over the server's upload limit is 413 and
	// a body that stops arriving is 400 (both *control.Error, from the
	// reader's Read too). Reading it to its end leaves the connection at
	// the next request; otherwise it is closed after the answer.
	UploadBody(ctx *fasthttp.RequestCtx) (io.Reader, error)

	// Upgrade answers a WebSocket handshake of p (authenticated, within its
	// request rate): it checks the handshake, admits the session with the
	// core (engine, balance, session slot, streaming feature, stream slot,
	// token: a refusal is an HTTP answer), writes the 101 (selecting one of
	// subprotocols, with the admission's headers) and serves the socket:
	// open makes the session, which the host registers under p's key (a
	// revocation ends it) and serves on the server's poller. The host
	// closes the socket and ends the admission once the session is over.
	// p nil (Route.FirstMessage): the 101 comes first, then admission.
	Upgrade(ctx *fasthttp.RequestCtx, p *control.Principal, subprotocols []string, open OpenSession)
}

// Job is the core's job as the HTTP server runs it: when the request came,
// and its spans (opaque to protocols).
type Job struct {
	synth.Job
	Start time.Time
	Trace any
}

// Stream is a streamed body as a protocol's run writes it. Writes queue;
// Flush hands what is queued to the connection; both answer an error once
// the client is gone.
type Stream interface {
	io.Writer
	Flush() error
	// Send is Write then Flush: a synth.Sink for raw audio.
	Send(b []byte) error
	// Sent reports that something was flushed: from then on a failure can
	// only end the body (an error event), not choose its status.
	Sent() bool
	// SelfEnded notes that the bytes carry their own end (a done or error
	// event): a failure after it does not also cut the body.
	SelfEnded()
}

// StreamFunc synthesizes a job into s, in the protocol's framing.
type StreamFunc func(ctx context.Context, s Stream) (synth.Result, error)

// Session is a WebSocket session as the host holds it (sessions.Session
// for the native protocol).
type Session interface {
	// Serve serves the session until it ends, then calls done once, from
	// any goroutine. ctx ends at the end of the server's grace period;
	// buffered holds bytes the client sent behind its handshake.
	Serve(ctx context.Context, poller *netpoll.Poller, buffered []byte, done func(error))
	// Revoke ends it because its credentials were revoked or expired.
	Revoke()
	// Drain ends it once its open work is done (shutdown).
	Drain()
}

// OpenSession makes the session of an upgraded socket.
type OpenSession func(conn *websocket.Conn, env SessionEnv) Session

// SessionEnv is what a session is given besides its socket.
type SessionEnv struct {
	Principal *control.Principal
	// Admission is the core's admission of the session: its billing as
	// text arrives (sessions.Billing), ended by the host.
	Admission *synth.Admission
	// Observer follows its contexts: the server's metrics and spans.
	Observer sessions.ContextObserver
}

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = "voicesvc_session"

// ErrClientGone is a Stream's answer once its client has gone.
var ErrClientGone = errors.New("web: client gone")

// IsClientGone reports whether err means the client left (its stream
// closed, or the synthesis cancelled for it): no answer is owed.
func IsClientGone(err error) bool {
	return errors.Is(err, ErrClientGone) || errors.Is(err, context.Canceled)
}

// SessionDeps are what every realtime protocol's session runs on: the
// core's engines and its voice lookup for env's principal, the admission's
// billing, the host's logger and observer, and the protocol's Wire (nil:
// the native protocol's).
func SessionDeps(h Host, env SessionEnv, w sessions.Wire) sessions.Deps {
	core, p := h.Core(), env.Principal
	return sessions.Deps{
		Engines:  core.Engines(),
		Voice:    func(c context.Context, ref string) (*control.Voice, error) { return core.Voice(c, p, ref) },
		Billing:  env.Admission,
		Logger:   h.Logger(), // not a With per session: an idle session stays small
		Observer: env.Observer,
		Wire:     w,
	}
}
