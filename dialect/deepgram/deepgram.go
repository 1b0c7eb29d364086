// Package deepgram is the Deepgram dialect (docs/dialects.md#deepgram):
// Aura's speak API at the base URL {api_root}/compat/deepgram, so that a
// client made for it (the official @deepgram/sdk, LiveKit's and pipecat's
// Deepgram TTS) works given that base URL and a voicesvc key.
//
//	POST /v1/speak?model=&encoding=&container=&sample_rate=&bit_rate=&speed=
//	     {"text": "..."}                        -> the audio file (speak.go)
//	GET  /v1/speak?model=&encoding=&sample_rate=&speed= (WebSocket)
//	     Speak, Flush, Clear, Close             -> binary audio, Metadata,
//	                                               Flushed, Cleared (ws.go, wire.go)
//
// model names the voice (id, workspace alias, catalog alias); the query's
// format names map onto voicesvc's codecs (synth.ParseDeepgramSpeak).
// Credentials are Deepgram's forms: `Authorization: Token KEY` or
// `Bearer KEY`, and `Bearer` access tokens (auth.go). Errors, on its routes
// and on unknown paths under its base, take Deepgram's error shape
// (AppendError). The package only translates: voices, access, limits and
// billing are the core's.
package deepgram

import (
	"strings"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// base is the dialect's base path under the API root.
const base = "/compat/deepgram"

// speakPath is the speak route under the base (REST and, by GET, the
// socket).
const speakPath = "/v1/speak"

// Config tunes the dialect; zero fields take the defaults.
type Config struct {
	// Session configures the speak sockets' sessions.
	Session sessions.Config
}

// Protocol is the Deepgram dialect's routes.
type Protocol struct {
	cfg  Config
	h    web.Host
	rest *telemetry.Series
}

// New returns the Deepgram dialect.
func New(cfg Config) *Protocol { return &Protocol{cfg: cfg} }

var _ web.Protocol = (*Protocol)(nil)

func (*Protocol) Dialect() string { return telemetry.Deepgram }

// Prefixes: every path under the base answers in Deepgram's shape.
func (*Protocol) Prefixes() []string { return []string{web.APIRoot + base + "/"} }

// Register adds the speak route. Its credentials are found by
// authenticate (Deepgram's forms); the host checks the tts scope and the
// request rate.
func (d *Protocol) Register(h web.Host) {
	d.h = h
	d.rest = h.Series(telemetry.Compat)
	h.Handle(web.Route{Method: "POST", Path: base + speakPath, Scope: control.ScopeTTS, Auth: d.authenticate,
		Streams: true}, d.speak)
	d.registerSocket(h)
}

// AppendError writes Deepgram's error body,
//
//	{"category": "INVALID_QUERY_PARAMETER", "message": "...",
//	 "request_id": "...", "code": "invalid_sample_rate"}
//
// category is the vendor's kind of error for the status (and, for a 400,
// whether a query parameter or the body is at fault); code is voicesvc's
// (absent on a plain 401, like the envelope's).
func (*Protocol) AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	msg := e.Message
	if msg == "" {
		msg = strings.ReplaceAll(e.Code, "_", " ")
	}
	b = append(b, `{"category":`...)
	b = jsonw.AppendString(b, category(e, status))
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"request_id":`...)
	b = jsonw.AppendString(b, string(web.RequestID(ctx)))
	if code := web.WireCode(e); code != "" {
		b = append(b, `,"code":`...)
		b = jsonw.AppendString(b, code)
	}
	return append(b, '}')
}

// queryParams are the fields a Deepgram client sends in the query: an
// error about one of them is INVALID_QUERY_PARAMETER.
var queryParams = []string{"model", "encoding", "container", "sample_rate", "bit_rate", "speed", "callback"}

// category is Deepgram's error category for e answered with status.
func category(e *control.Error, status int) string {
	switch {
	case status == 400 && isQueryParam(e):
		return "INVALID_QUERY_PARAMETER"
	case e.Code == control.EUnsupportedFormat || e.Code == control.EInvalidOutputFormat:
		return "INVALID_QUERY_PARAMETER" // encoding is a query parameter
	case e.Code == control.EInvalidJSON || e.Code == control.ETextRequired || e.Code == control.ETextTooLong:
		return "INVALID_REQUEST_BODY"
	case status == 400:
		return "BAD_REQUEST"
	case status == 401:
		return "INVALID_AUTH"
	case status == 402:
		return "INSUFFICIENT_CREDITS"
	case status == 403:
		return "INSUFFICIENT_PERMISSIONS"
	case status == 404:
		return "NOT_FOUND"
	case status == 405:
		return "METHOD_NOT_ALLOWED"
	case status == 413:
		return "PAYLOAD_TOO_LARGE"
	case status == 429:
		return "TOO_MANY_REQUESTS"
	case status == 503:
		return "SERVICE_UNAVAILABLE"
	case status >= 500:
		return "INTERNAL_SERVER_ERROR"
	}
	return "BAD_REQUEST"
}

func isQueryParam(e *control.Error) bool {
	if e.Code == control.EInvalidSampleRate || e.Code == control.EInvalidSpeed {
		return true
	}
	for _, q := range queryParams {
		if e.Param == q {
			return true
		}
	}
	return false
}
