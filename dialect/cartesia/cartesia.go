// Package cartesia is the Cartesia dialect (docs/dialects.md#cartesia):
// Cartesia's TTS API at the base URL {api_root}/compat/cartesia, so that an
// agent built on Cartesia's clients (@cartesia/cartesia-js, pipecat,
// LiveKit's Cartesia plugin) runs on voicesvc by changing its base URL and
// key:
//
//	POST /tts/bytes       one audio body: raw, wav or mp3 (bytes.go)
//	POST /tts/sse         chunk, timestamps and done events (sse.go)
//	GET  /tts/websocket   the realtime socket: contexts, continue, flush,
//	                      cancel, timestamps (ws.go)
//	GET  /voices          the voice list in Cartesia's paged shape (voices.go)
//
// The /tts/* routes answer at the host root too: LiveKit's plugin posts
// synthesize() to /tts/bytes at the root of its base URL.
//
// It only translates: bodies are validated by the core's rules
// (synth.ParseCartesia), the core decides voices, access, limits and
// billing, and the host streams the answers. Credentials are Cartesia's
// forms (authenticate), errors Cartesia's shape (AppendError).
package cartesia

import (
	"bytes"
	"net/http"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// base is the dialect's base path under the API root.
const base = "/compat/cartesia"

// Paths under the base (and, for /tts/*, at the host root).
const (
	bytesPath     = "/tts/bytes"
	ssePath       = "/tts/sse"
	websocketPath = "/tts/websocket"
	voicesPath    = "/voices"
)

// Config tunes the dialect; zero fields take the defaults.
type Config struct {
	// SSEChunk is the audio per chunk event after the first, which leaves
	// at once; 0: synth.DefaultCoalesce (40 ms).
	SSEChunk time.Duration
	// Session configures the realtime sessions of /tts/websocket.
	Session sessions.Config
}

// Protocol is the Cartesia dialect's routes.
type Protocol struct {
	cfg Config
	h   web.Host
	// Series resolved once at registration.
	speak, sse *telemetry.Series
}

// New returns the Cartesia dialect.
func New(cfg Config) *Protocol { return &Protocol{cfg: cfg} }

var _ web.Protocol = (*Protocol)(nil)

func (*Protocol) Dialect() string { return telemetry.Cartesia }

// Prefixes: every path under the base answers in Cartesia's shape, unknown
// ones included (longer than the OpenAI dialect's /compat/, so it wins),
// and so do the /tts/ paths at the host root, whose routes are Cartesia's.
func (*Protocol) Prefixes() []string { return []string{web.APIRoot + base + "/", rootPrefix} }

// rootPrefix holds the routes answered at the host root too.
const rootPrefix = "/tts/"

// Register adds the routes at the base and the /tts/* ones at the host
// root too. Synthesis takes scope tts, the voice list voices:read.
func (c *Protocol) Register(h web.Host) {
	c.h = h
	c.speak, c.sse = h.Series(telemetry.Speak), h.Series(telemetry.SSE)
	for _, root := range []bool{false, true} {
		path := func(p string) string {
			if root {
				return p
			}
			return base + p
		}
		h.Handle(web.Route{Method: "POST", Path: path(bytesPath), Root: root, Scope: control.ScopeTTS,
			Auth: c.authenticate, Streams: true}, c.bytes)
		h.Handle(web.Route{Method: "POST", Path: path(ssePath), Root: root, Scope: control.ScopeTTS,
			Auth: c.authenticate, Streams: true}, c.sseHandler)
		c.registerWebSocket(h, path(websocketPath), root)
	}
	h.Handle(web.Route{Method: "GET", Path: base + voicesPath, Scope: control.ScopeVoicesRead,
		Auth: c.authenticate}, c.voices)
}

var (
	hdrAPIKey        = []byte("X-API-Key")
	hdrAuthorization = []byte("Authorization")
	bearerPrefix     = []byte("Bearer ")
	argAccessToken   = []byte("access_token")
	argAPIKey        = []byte("api_key")
	tokenPrefix      = []byte(control.AccessTokenPrefix)
	errUnauthorized  = control.Errorf(control.EUnauthorized, "missing or invalid API key")
)

// authenticate finds the credentials of a request in Cartesia's forms, the
// first present deciding (a bad one is 401, never a fall-through):
// X-API-Key (LiveKit's plugin); `Authorization: Bearer` (the official
// client's apiKey, and its token: a voicesvc access token, vst_...); and,
// on the socket only, the query's access_token or api_key (the client in a
// browser, which cannot set headers). Cartesia-Version is accepted with any
// value and not read.
func (c *Protocol) authenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	if key := ctx.Request.Header.PeekBytes(hdrAPIKey); len(key) > 0 {
		return c.h.AuthKey(key)
	}
	if cred := bearer(ctx); len(cred) > 0 {
		return c.credential(cred)
	}
	if !ctx.IsGet() { // the socket's handshake is the only GET with a query form
		return nil, errUnauthorized
	}
	q := ctx.QueryArgs()
	if tok := q.PeekBytes(argAccessToken); len(tok) > 0 {
		return c.h.AuthToken(tok)
	}
	if key := q.PeekBytes(argAPIKey); len(key) > 0 {
		return c.credential(key)
	}
	return nil, errUnauthorized
}

// credential is an API key, or an access token by its prefix.
func (c *Protocol) credential(cred []byte) (*control.Principal, error) {
	if bytes.HasPrefix(cred, tokenPrefix) {
		return c.h.AuthToken(cred)
	}
	return c.h.AuthKey(cred)
}

// bearer returns the credential of `Authorization: Bearer <cred>`.
func bearer(ctx *fasthttp.RequestCtx) []byte {
	h := ctx.Request.Header.PeekBytes(hdrAuthorization)
	if len(h) <= len(bearerPrefix) || !bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return nil
	}
	return bytes.TrimSpace(h[len(bearerPrefix):])
}

// AppendError writes Cartesia's HTTP error object (its API reference, "API
// Errors"): {"error_code", "title", "message", "request_id"}. error_code is
// voicesvc's code (null for a plain 401), title the status's text.
func (*Protocol) AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	b = append(b, `{"error_code":`...)
	b = appendCode(b, e)
	b = append(b, `,"title":`...)
	b = jsonw.AppendString(b, http.StatusText(status))
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, message(e))
	b = append(b, `,"request_id":`...)
	b = jsonw.AppendString(b, string(web.RequestID(ctx)))
	return append(b, '}')
}

func appendCode(b []byte, e *control.Error) []byte {
	if code := web.WireCode(e); code != "" {
		return jsonw.AppendString(b, code)
	}
	return append(b, "null"...)
}

// message is the error's message, or its code in words.
func message(e *control.Error) string {
	if e.Message != "" {
		return e.Message
	}
	return strings.ReplaceAll(e.Code, "_", " ")
}
