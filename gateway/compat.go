package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/langtag"
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

// compatParamKey is the ctx user value naming the request field an error
// is about (the shape's "param"), when the code alone does not say.
const compatParamKey = "compat_param"

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

// compatRequest is a validated compat body.
type compatRequest struct {
	voice string // alias or id
	opts  synth.Options
	sse   bool // stream_format "sse"
}

// POST /compat/audio/speech
func (s *Server) compatSpeech(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, param, err := parseCompat(ctx.Request.Body())
	if err != nil {
		s.compatFail(ctx, param, err)
		return
	}
	id, err := s.compatVoiceID(in.voice, p)
	if err != nil {
		s.compatFail(ctx, "voice", err)
		return
	}
	job, err := s.prepareSynth(id, p, in.opts)
	if control.IsCode(err, control.ENotFound) {
		err = control.Errorf(control.ENotFound, "voice %q not found", in.voice)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	a := s.admitJob(ctx, p, job, false)
	if a == nil {
		return
	}
	// Without the plan's streaming feature the whole clip comes in one
	// response (docs/api.md#compatible-speech).
	if in.sse {
		s.compatSSE(ctx, job, a, !p.Limits.Streaming)
		return
	}
	s.respondAudio(ctx, job, a, "compat", !p.Limits.Streaming, setCompatAudioHeaders)
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

// compatFail answers err naming the request field it is about.
func (s *Server) compatFail(ctx *fasthttp.RequestCtx, param string, err error) {
	if param != "" {
		ctx.SetUserValue(compatParamKey, param)
	}
	s.writeError(ctx, err)
}

// parseCompat validates a compat body. Fields are checked in a fixed order
// (model, input, voice, response_format, speed, stream_format, language) so
// that one body always answers one error; param names the field at fault.
func parseCompat(body []byte) (compatRequest, string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return compatRequest{}, "", control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	var in compatRequest
	model, present, ok := jsonString(m["model"])
	switch {
	case !ok:
		return in, "model", control.Errorf(control.EInvalidRequest, "model must be a string")
	case !present || model == "":
		return in, "model", control.Errorf(control.EInvalidRequest, "model is required; use \"service-v1\"")
	}
	// Any model value routes to the one model there is.

	text, present, ok := jsonString(m["input"])
	switch {
	case !ok:
		return in, "input", control.Errorf(control.EInvalidRequest, "input must be a string")
	case !present || strings.TrimSpace(text) == "":
		return in, "input", control.Errorf(control.ETextRequired, "input is required")
	}
	if n := control.CountChars(text); n > synth.MaxTextChars {
		return in, "input", control.Errorf(control.ETextTooLong, "input has %d characters; the limit is %d", n, synth.MaxTextChars)
	}

	voice, present, ok := jsonString(m["voice"])
	switch {
	case !ok:
		return in, "voice", control.Errorf(control.EInvalidRequest, "voice must be a string: a voice alias or id")
	case !present || voice == "":
		return in, "voice", control.Errorf(control.EInvalidRequest, "voice is required: a voice alias or id")
	}

	o := synth.Options{Text: text, Format: codec.MP3, SampleRate: synth.DefaultSampleRate, NumStep: synth.DefaultNumStep}
	rf, present, ok := jsonString(m["response_format"])
	if present || !ok {
		f, known := compatFormats[rf]
		if !known {
			return in, "response_format", control.Errorf(control.EInvalidOutputFormat,
				"response_format must be one of mp3, opus, flac, wav, pcm")
		}
		o.Format = f
	}
	if o.Format == codec.MP3 && !codec.MP3Available {
		return in, "response_format", control.Errorf(control.EUnsupportedFormat,
			"this deployment has no MP3 encoder; ask for response_format \"opus\", \"flac\", \"wav\" or \"pcm\"")
	}

	if v := m["speed"]; len(v) > 0 && string(v) != "null" {
		sp, err := strconv.ParseFloat(string(v), 64)
		if v[0] == '"' || err != nil || sp < synth.MinSpeed || sp > synth.MaxSpeed {
			return in, "speed", control.Errorf(control.EInvalidSpeed, "speed must be a number from %g to %g", synth.MinSpeed, synth.MaxSpeed)
		}
		o.Speed = &sp
	}

	switch sf, present, ok := jsonString(m["stream_format"]); {
	case !ok || present && sf != "audio" && sf != "sse":
		return in, "stream_format", control.Errorf(control.EInvalidRequest, "stream_format must be \"audio\" or \"sse\"")
	case sf == "sse":
		in.sse = true
	}

	lang, present, ok := jsonString(m["language"])
	if !ok || present && lang != "" && !wellFormed(lang) {
		return in, "language", control.Errorf(control.EInvalidLanguage, "language must be a BCP-47 tag such as \"en\" or \"hi\"")
	}
	o.Language = lang
	in.voice, in.opts = voice, o
	return in, "", nil
}

// compatFormats maps response_format names to pipeline formats. "opus" is
// an Ogg Opus file here (what the third-party clients expect), not the
// WebSocket's bare 20 ms packets; "pcm" is s16le at 24000 Hz.
var compatFormats = map[string]codec.Format{
	"mp3": codec.MP3, "opus": codec.OggOpus, "flac": codec.FLAC, "wav": codec.WAV, "pcm": codec.S16LE,
}

func wellFormed(tag string) bool {
	_, ok := langtag.Canonical(tag)
	return ok
}

// jsonString decodes an optional JSON string: present is false when the
// value is absent or null, ok false when it is another type.
func jsonString(v json.RawMessage) (s string, present, ok bool) {
	if len(v) == 0 || string(v) == "null" {
		return "", false, true
	}
	if v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", true, false
	}
	return s, true, true
}

// compatVoiceID resolves a voice id or alias to the id of a voice p may
// use; anything else is 404.
func (s *Server) compatVoiceID(name string, p *control.Principal) (string, error) {
	if control.ValidID(name) {
		return name, nil // prepareSynth checks it
	}
	v, err := s.voices.getByAlias(s.store, name)
	if err != nil {
		if control.IsCode(err, control.ENotFound) {
			return "", control.Errorf(control.ENotFound, "voice %q not found", name)
		}
		return "", err
	}
	if !v.Usable(p.WorkspaceID) {
		return "", control.Errorf(control.ENotFound, "voice %q not found", name)
	}
	return v.ID, nil
}

// getByAlias finds a public voice by alias. The cache keeps alias -> voice
// under "@alias" (ids are hex, so keys never collide) and trusts it only as
// far as the id entry, which invalidations reach: the voice is re-read by
// id, and a voice that lost the alias sends the lookup back to the store.
func (c *voiceCache) getByAlias(store control.VoiceService, alias string) (*control.Voice, error) {
	key := "@" + alias
	now := time.Now().UnixMilli()
	live := c.live.Load()
	c.mu.RLock()
	e, ok := c.m[key]
	gen := c.gen
	c.mu.RUnlock()
	if live && ok && now-e.at < c.ttl {
		if v, err := c.get(store, e.v.ID); err == nil && v.Alias == alias {
			return v, nil
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	v, err := store.GetVoiceByAlias(sctx, alias)
	cancel()
	if err != nil {
		return nil, err
	}
	if live {
		c.mu.Lock()
		if c.gen == gen && len(c.m) < maxCachedVoices {
			c.m[key] = voiceEntry{v: v, at: now}
		}
		c.mu.Unlock()
	}
	return v, nil
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
	if param := compatParam(ctx, e.Code); param != "" {
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
func compatParam(ctx *fasthttp.RequestCtx, code string) string {
	if p, ok := ctx.UserValue(compatParamKey).(string); ok {
		return p
	}
	switch code {
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
