// Package openai is the OpenAI dialect: the compatible speech endpoint
// (docs/api.md#compatible-speech), POST {api_root}/compat/audio/speech in the
// request shape of the widely used third-party TTS API, so that a tool given
// the base URL {api_root}/compat (or {api_root}/compat/openai) works
// unchanged.
//
//	{"model": "service-v1", "voice": "<alias or id>", "input": "...",
//	 "response_format": "mp3" | "opus" | "flac" | "wav" | "pcm",
//	 "speed": 0.25-4, "stream_format": "audio" | "sse", "language": "en"}
//
// model is required and any value routes to the one model; instructions and
// unknown fields are ignored. opus is an Ogg Opus file (audio/ogg), not the
// WebSocket's bare packets. stream_format "sse" wraps the same bytes in
// speech.audio.delta events (sse.go). Auth is an API key as
// `Authorization: Bearer` or X-API-Key (scope tts); access tokens and
// anything else are 401 (web.BearerKeys). GET /compat/models, /compat/models/{model}
// and /compat/audio/voices (lists.go) take the same credentials.
//
// The order is speak's: rps (route wrapper) -> body (synth.ParseOpenAI) ->
// the core's Prepare (voice, engine, language) and admission (slot,
// charge; no feature refusal: without the plan's streaming feature the
// clip is buffered instead) -> synthesize -> finish. With
// streaming, every format leaves as the engine yields it (wav with a header
// of unknown sizes); without, the whole clip in one response (wav with its
// true sizes). Errors, including those of the route wrapper, 404s under
// /compat/ and panics, use the third-party shape (AppendError).
package openai

import (
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// Paths under the dialect's bases.
const (
	speechPath = "/audio/speech"
	modelsPath = "/models"
	voicesPath = "/audio/voices"
)

// bases are where the dialect answers: {api_root}/compat, and
// {api_root}/compat/openai beside the other dialects' bases.
var bases = []string{"/compat", "/compat/openai"}

// Config tunes the dialect; zero fields take the defaults.
type Config struct {
	// SSEChunk is the audio per delta event of the raw formats after the
	// first; 0: synth.DefaultCoalesce (40 ms).
	SSEChunk time.Duration
}

// Protocol is the OpenAI dialect's routes.
type Protocol struct {
	cfg    Config
	h      web.Host
	series *telemetry.Series
}

// New returns the OpenAI dialect.
func New(cfg Config) *Protocol { return &Protocol{cfg: cfg} }

var _ web.Protocol = (*Protocol)(nil)

func (*Protocol) Dialect() string { return telemetry.OpenAI }

// Prefixes: every path under /compat/ that no other dialect claims
// answers in this shape (the longest prefix wins).
func (*Protocol) Prefixes() []string { return []string{web.APIRoot + "/compat/"} }

// Register adds the speech endpoint and its listings at both bases. They
// take API keys as `Authorization: Bearer` or X-API-Key (scope tts);
// access tokens and anything else are 401.
func (o *Protocol) Register(h web.Host) {
	o.h = h
	o.series = h.Series(telemetry.Compat)
	for _, base := range bases {
		h.Handle(web.Route{Method: "POST", Path: base + speechPath, Scope: control.ScopeTTS, Creds: web.BearerKeys,
			Streams: true}, o.speech)
		h.Handle(web.Route{Method: "GET", Path: base + modelsPath, Scope: control.ScopeTTS, Creds: web.BearerKeys}, o.models)
		h.Handle(web.Route{Method: "GET", Path: base + modelsPath + "/{model}", Scope: control.ScopeTTS, Creds: web.BearerKeys}, o.model)
		h.Handle(web.Route{Method: "GET", Path: base + voicesPath, Scope: control.ScopeTTS, Creds: web.BearerKeys}, o.voices)
	}
}

// POST /compat/audio/speech
func (o *Protocol) speech(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, err := synth.ParseOpenAI(ctx.Request.Body())
	if err != nil {
		o.h.WriteError(ctx, err)
		return
	}
	job := o.h.Begin(ctx, p, in.Voice, in.Options, false)
	if job == nil {
		return
	}
	// Without the plan's streaming feature the whole clip comes in one
	// response (docs/api.md#compatible-speech).
	if in.SSE {
		o.speechSSE(ctx, job, !p.Limits.Streaming)
		return
	}
	o.h.RespondAudio(ctx, job, o.series, !p.Limits.Streaming, setAudioHeaders)
}

var (
	hdrSampleRate   = []byte("X-Sample-Rate")
	hdrAudioFormat  = []byte("X-Audio-Format")
	hdrChannels     = []byte("X-Channels")
	valOne          = []byte("1")
	valS16LE        = []byte(codec.S16LE)
	contentTypeMPEG = []byte("audio/mpeg")
	contentTypeWAV  = []byte("audio/wav")
	contentTypePCM  = []byte("audio/pcm")
	contentTypeOgg  = []byte("audio/ogg")
	contentTypeFLAC = []byte("audio/flac")
	contentTypeJSON = []byte("application/json")
)

// setAudioHeaders: audio/mpeg, audio/ogg, audio/flac, audio/wav, or
// audio/pcm with the rate, format and channel headers of speak's raw
// formats.
func setAudioHeaders(ctx *fasthttp.RequestCtx, p *codec.Pipeline) {
	h := &ctx.Response.Header
	switch p.Format() {
	case codec.MP3:
		h.SetContentTypeBytes(contentTypeMPEG)
	case codec.WAV:
		h.SetContentTypeBytes(contentTypeWAV)
	case codec.OggOpus:
		h.SetContentTypeBytes(contentTypeOgg)
	case codec.FLAC:
		h.SetContentTypeBytes(contentTypeFLAC)
	default:
		h.SetContentTypeBytes(contentTypePCM)
		var buf [8]byte
		h.SetCanonical(hdrSampleRate, strconv.AppendInt(buf[:0], int64(p.Rate()), 10))
		h.SetCanonical(hdrAudioFormat, valS16LE)
		h.SetCanonical(hdrChannels, valOne)
	}
}

// AppendError writes {"error": {"message", "type", "param", "code"}}
// for every error on the dialect's paths, unknown ones included. code is
// ours; a plain 401 has none (null), like the envelope's.
func (*Protocol) AppendError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	msg := e.Message
	if msg == "" {
		msg = strings.ReplaceAll(e.Code, "_", " ")
	}
	b = append(b, `{"error":{"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"type":`...)
	b = jsonw.AppendString(b, errorType(status))
	b = append(b, `,"param":`...)
	if param := param(ctx, e); param != "" {
		b = jsonw.AppendString(b, param)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"code":`...)
	if code := web.WireCode(e); code != "" {
		b = jsonw.AppendString(b, code)
	} else {
		b = append(b, "null"...)
	}
	return append(b, "}}"...)
}

// errorType is the error type the third-party clients know for a status.
func errorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 402:
		return "insufficient_quota"
	case status == 403:
		return "permission_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

// param: the field the handler named, else the field the code is
// about (errors from Prepare), else none.
func param(ctx *fasthttp.RequestCtx, e *control.Error) string {
	if e.Param != "" {
		return e.Param
	}
	switch e.Code {
	case control.ETextRequired, control.ETextTooLong:
		return "input"
	case control.EInvalidOutputFormat, control.EUnsupportedFormat:
		return "response_format"
	case control.EInvalidSpeed:
		return "speed"
	case control.EInvalidLanguage:
		return "language"
	case control.EVoiceNotReady, control.EVoiceNotAllowed:
		return "voice"
	case control.ENotFound:
		if bytes.HasSuffix(ctx.Path(), []byte(speechPath)) {
			return "voice"
		}
	}
	return ""
}
