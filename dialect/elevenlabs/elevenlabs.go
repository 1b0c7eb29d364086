// Package elevenlabs is the ElevenLabs dialect (docs/dialects.md#elevenlabs):
// the text-to-speech API that most voice tools already speak, served at the
// base URL {api_root}/compat/elevenlabs so that the vendor's official client
// (`new ElevenLabsClient({ apiKey, baseUrl })`) and LiveKit's plugin
// (baseURL {api_root}/compat/elevenlabs/v1) work unchanged but for the base
// URL and the key.
//
//	POST /v1/text-to-speech/{voice_id}                        audio
//	POST /v1/text-to-speech/{voice_id}/stream                 audio, streamed
//	POST /v1/text-to-speech/{voice_id}/with-timestamps        JSON: audio_base64 and character alignment
//	POST /v1/text-to-speech/{voice_id}/stream/with-timestamps one such JSON object a line, streamed
//	GET  /v1/voices, /v1/models, /v1/user/subscription
//
// It only translates: bodies are validated by the core's rules
// (synth.ParseElevenLabs, with output_format from the query), voice_id is
// looked up as every voice name is (id, workspace alias, catalog alias), and
// the core admits, bills and limits; the host streams the answer. Errors,
// on its routes and for unknown paths under its base, take the vendor's
// shape {"detail": {"status", "message", "code"}}.
package elevenlabs

import (
	"bytes"
	"strings"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// Base is the dialect's base URL under the API root.
const Base = "/compat/elevenlabs"

// Paths under Base.
const (
	ttsPath          = "/v1/text-to-speech/{voice_id}"
	voicesPath       = "/v1/voices"
	modelsPath       = "/v1/models"
	subscriptionPath = "/v1/user/subscription"
)

// Config tunes the dialect; zero fields take the defaults.
type Config struct {
	// Session configures the realtime sessions (MaxContexts is the
	// vendor's 5, whatever it says).
	Session sessions.Config
}

// Protocol is the ElevenLabs dialect's routes.
type Protocol struct {
	cfg    Config
	h      web.Host
	series *telemetry.Series // the HTTP routes' synthesis metrics
}

// New returns the ElevenLabs dialect.
func New(cfg Config) *Protocol { return &Protocol{cfg: cfg} }

var _ web.Protocol = (*Protocol)(nil)

// Dialect is the value of the dialect label on its metrics.
func (*Protocol) Dialect() string { return "elevenlabs" }

// Prefixes: every path under the base answers in the vendor's shape.
func (*Protocol) Prefixes() []string { return []string{web.APIRoot + Base + "/"} }

// Register adds the routes. Credentials are the vendor's (authenticate):
// scope tts for synthesis, the models and the subscription; voices:read
// for the voice list.
func (e *Protocol) Register(h web.Host) {
	e.h = h
	e.series = h.Series(telemetry.Compat)
	tts := func(tail string, handler web.Handler) {
		h.Handle(web.Route{Method: "POST", Path: Base + ttsPath + tail, Scope: control.ScopeTTS,
			Auth: e.authenticate, Streams: true}, handler)
	}
	tts("", e.convert)
	tts("/stream", e.stream)
	tts("/with-timestamps", e.withTimestamps)
	tts("/stream/with-timestamps", e.streamWithTimestamps)
	h.Handle(web.Route{Method: "GET", Path: Base + voicesPath, Scope: control.ScopeVoicesRead, Auth: e.authenticate}, e.voices)
	h.Handle(web.Route{Method: "GET", Path: Base + modelsPath, Scope: control.ScopeTTS, Auth: e.authenticate}, e.models)
	h.Handle(web.Route{Method: "GET", Path: Base + subscriptionPath, Scope: control.ScopeTTS, Auth: e.authenticate}, e.subscription)
	e.registerSockets(h)
}

var (
	hdrXIAPIKey      = []byte("xi-api-key")
	hdrAuthorization = []byte("Authorization")
	prefixBearer     = []byte("Bearer ")
	prefixToken      = []byte(control.AccessTokenPrefix)
	errUnauthorized  = control.Errorf(control.EUnauthorized, "missing or invalid xi-api-key")
)

// authenticate finds the credentials the vendor's clients send: the
// xi-api-key header (an API key, or a voicesvc access token where a browser
// puts its single-use token), else `Authorization: Bearer` with either. The
// first form present decides: a bad one is 401, never a fall-through.
func (e *Protocol) authenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	if cred := ctx.Request.Header.PeekBytes(hdrXIAPIKey); len(cred) > 0 {
		return e.credential(cred)
	}
	if a := ctx.Request.Header.PeekBytes(hdrAuthorization); len(a) > len(prefixBearer) &&
		bytes.EqualFold(a[:len(prefixBearer)], prefixBearer) {
		return e.credential(bytes.TrimSpace(a[len(prefixBearer):]))
	}
	return nil, errUnauthorized
}

// credential is an access token (vst_...) or an API key.
func (e *Protocol) credential(cred []byte) (*control.Principal, error) {
	if bytes.HasPrefix(cred, prefixToken) {
		return e.h.AuthToken(cred)
	}
	return e.h.AuthKey(cred)
}

// AppendError writes {"detail": {"status", "message", "code"}}: status is
// the vendor's name for the failure where it has one (its clients and docs
// key on invalid_api_key, voice_not_found, quota_exceeded, ...), else
// voicesvc's code; code is voicesvc's code (absent on a plain 401), and
// param the field at fault when there is one.
func (*Protocol) AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	msg := e.Message
	if msg == "" {
		msg = strings.ReplaceAll(e.Code, "_", " ")
	}
	b = append(b, `{"detail":{"status":`...)
	b = jsonw.AppendString(b, vendorStatus(ctx, e))
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	if code := web.WireCode(e); code != "" {
		b = append(b, `,"code":`...)
		b = jsonw.AppendString(b, code)
	}
	if e.Param != "" {
		b = append(b, `,"param":`...)
		b = jsonw.AppendString(b, e.Param)
	}
	if id := web.RequestID(ctx); len(id) > 0 {
		b = append(b, `,"request_id":`...)
		b = jsonw.AppendString(b, string(id))
	}
	return append(b, "}}"...)
}

// vendorStatus is the vendor's status word for e.
func vendorStatus(ctx *fasthttp.RequestCtx, e *control.Error) string {
	switch e.Code {
	case control.EUnauthorized, control.EKeyExpired, control.ETokenInvalid:
		return "invalid_api_key"
	case control.EQuotaExhausted, control.EInsufficientCredits:
		return "quota_exceeded"
	case control.ETextTooLong:
		return "max_character_limit_exceeded"
	case control.EConcurrencyLimited, control.ETooManySessions:
		return "too_many_concurrent_requests"
	case control.ERateLimited:
		return "rate_limit_exceeded"
	case control.EInsufficientScope:
		return "missing_permissions"
	case control.EVoiceNotAllowed:
		return "voice_not_allowed"
	case control.ENotFound:
		if voiceID(ctx) != "" { // a synthesis route: its voice is unknown
			return "voice_not_found"
		}
		return "not_found"
	}
	return e.Code
}
