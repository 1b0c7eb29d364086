package gateway

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
)

// The compatible speech endpoint (docs/api.md#compatible-speech): POST {api_root}/compat/audio/speech in the
// request shape of the widely used third-party TTS API, so that a tool given
// the base URL {api_root}/compat works unchanged.
//
//	{"model": "service-v1", "voice": "<alias or id>", "input": "...",
//	 "response_format": "mp3" | "opus" | "flac" | "wav" | "pcm",
//	 "speed": 0.25-4, "stream_format": "audio" | "sse", "language": "en"}
//
// model is required and any value routes to the one model; instructions and
// unknown fields are ignored. opus is an Ogg Opus file (audio/ogg), not the
// WebSocket's bare packets. stream_format "sse" wraps the same bytes in
// speech.audio.delta events (compat_sse.go). Auth is an API key as
// `Authorization: Bearer` or X-API-Key (scope tts); access tokens and
// anything else are 401 (auth.go, route flag bearerKeys). GET /compat/models
// and /compat/audio/voices (compat_list.go) take the same credentials.
//
// The order is speak's: rps (route wrapper) -> body -> voice -> Prepare ->
// admit (slot, charge; no feature refusal: without the plan's streaming
// feature the clip is buffered instead) -> synthesize -> Done. With
// streaming, every format leaves as the engine yields it (wav with a header
// of unknown sizes); without, the whole clip in one response (wav with its
// true sizes). Errors, including those of the route wrapper, 404s under
// /compat/ and panics, use the third-party shape (writeError's hook:
// appendCompatError).

const compatPath = "/compat/audio/speech"

var (
	compatPrefix    = []byte(APIRoot + "/compat/")
	contentTypeMPEG = []byte("audio/mpeg")
	contentTypePCM  = []byte("audio/pcm")
	contentTypeOgg  = []byte("audio/ogg")
	contentTypeFLAC = []byte("audio/flac")
	valS16LE        = []byte(codec.S16LE)
)

// compatRoutes registers the compat endpoint (called from routes).
func (s *Server) compatRoutes(g *router.Group) {
	rt := s.apiRoute("POST "+compatPath, control.ScopeTTS, withBearerKeys)
	s.handle(g, "POST", compatPath, rt, s.compatSpeech)
	s.compatListRoutes(g)
}

// isCompatPath: responses under {api_root}/compat/ use the third-party
// error shape.
func isCompatPath(ctx *fasthttp.RequestCtx) bool {
	return bytes.HasPrefix(ctx.Path(), compatPrefix)
}

// POST /compat/audio/speech
func (s *Server) compatSpeech(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, err := synth.ParseOpenAI(ctx.Request.Body())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	job, err := s.prepareSynth(ctx, in.Voice, p, in.Options)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if !s.admitJob(ctx, p, job, false) {
		return
	}
	// Without the plan's streaming feature the whole clip comes in one
	// response (docs/api.md#compatible-speech).
	if in.SSE {
		s.compatSSE(ctx, job, !p.Limits.Streaming)
		return
	}
	s.respondAudio(ctx, job, "compat", !p.Limits.Streaming, setCompatAudioHeaders)
}

// setCompatAudioHeaders: audio/mpeg, audio/ogg, audio/flac, audio/wav, or
// audio/pcm with the rate, format and channel headers of speak's raw
// formats.
func setCompatAudioHeaders(ctx *fasthttp.RequestCtx, p *codec.Pipeline) {
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

// appendCompatError writes {"error": {"message", "type", "param", "code"}}
// (writeError's body for paths under /compat/). code is ours; a plain 401
// has none (null), like the envelope's.
func appendCompatError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error) []byte {
	msg := e.Message
	if msg == "" {
		msg = strings.ReplaceAll(e.Code, "_", " ")
	}
	b = append(b, `{"error":{"message":`...)
	b = appendString(b, msg)
	b = append(b, `,"type":`...)
	b = appendString(b, compatType(statusOf(e.Code)))
	b = append(b, `,"param":`...)
	if param := compatParam(ctx, e); param != "" {
		b = appendString(b, param)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"code":`...)
	if code := wireCode(e); code != "" {
		b = appendString(b, code)
	} else {
		b = append(b, "null"...)
	}
	return append(b, "}}"...)
}

// compatType is the error type the third-party clients know for a status.
func compatType(status int) string {
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

// compatParam: the field the handler named, else the field the code is
// about (errors from Prepare), else none.
func compatParam(ctx *fasthttp.RequestCtx, e *control.Error) string {
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
		if bytes.HasSuffix(ctx.Path(), []byte(compatPath)) {
			return "voice"
		}
	}
	return ""
}
