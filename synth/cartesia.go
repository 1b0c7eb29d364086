package synth

import (
	"encoding/json"
	"slices"
	"strings"

	"voicesvc/codec"
	"voicesvc/control"
)

// The Cartesia dialect's requests (docs/dialects.md#cartesia): the body of
// POST /tts/bytes and /tts/sse, and each generation message of the
// /tts/websocket socket, in the shape of Cartesia's API reference and its
// official client (@cartesia/cartesia-js), validated by the shared rules
// under Cartesia's field names:
//
//	{"model_id": "sonic-3", "transcript": "...",
//	 "voice": "<id or alias>" | {"mode": "id", "id": "<id or alias>"},
//	 "output_format": {"container": "raw" | "wav" | "mp3",
//	                   "encoding": "pcm_s16le" | "pcm_f32le" | "pcm_mulaw" | "pcm_alaw",
//	                   "sample_rate": 8000-48000, "bit_rate": ...},
//	 "language": "en" | "locale": "en-GB",
//	 "generation_config": {"speed": 0.25-4, "volume": 0-2, "emotion": "..."},
//	 "add_timestamps": bool, "context_id": "...",
//	 "continue": bool, "flush": bool, "max_buffer_delay_ms": 0-5000}
//
// model_id (any string) and the fields voicesvc has no use for
// (emotion, pronunciation_dict_id, normalization, add_phoneme_timestamps,
// use_normalized_timestamps, save, the deprecated speed, unknown keys) are
// accepted and ignored. A voice embedding (mode "embedding") is refused:
// voices are named.

// CartesiaKind is which Cartesia surface a request came to: they differ in
// the containers they offer and in whether the transcript may be empty.
type CartesiaKind uint8

const (
	// CartesiaBytes: POST /tts/bytes (containers raw, wav, mp3).
	CartesiaBytes CartesiaKind = iota
	// CartesiaSSE: POST /tts/sse (raw only).
	CartesiaSSE
	// CartesiaSocket: a generation message of /tts/websocket (raw only; a
	// transcript may be empty, as in a flush or the last message of a
	// context).
	CartesiaSocket
)

// Cartesia's buffering bounds (its API reference): max_buffer_delay_ms is
// 0-5000, 3000 when absent on a context.
const (
	CartesiaMaxBufferDelayMS     = 5000
	CartesiaDefaultBufferDelayMS = 3000
	// cartesiaMaxContextID bounds context_id: it is echoed in every
	// message and keys the socket's contexts.
	cartesiaMaxContextID = 256
)

// cartesiaEncodings name the raw encodings, and cartesiaWAV the encodings
// a wav container is made with. Cartesia's wav of float, mu-law or A-law
// samples has no voicesvc codec (WAV is 16-bit PCM): a 400 names the one
// supported.
var (
	cartesiaEncodings = []WireFormat{
		{Name: "pcm_s16le", Format: codec.S16LE}, {Name: "pcm_f32le", Format: codec.F32LE},
		{Name: "pcm_mulaw", Format: codec.MuLaw}, {Name: "pcm_alaw", Format: codec.ALaw},
	}
	cartesiaWAV = []WireFormat{{Name: "pcm_s16le", Format: codec.WAV}}
)

// CartesiaRules are the shared rules under Cartesia's names. The
// output format is decided by ParseCartesia (a container and an encoding,
// not one name); the default is raw pcm_s16le.
var CartesiaRules = Rules{
	Format:       codec.S16LE,
	FormatNames:  cartesiaEncodings,
	MaxTextChars: MaxTextChars,
	Speed:        true,
	Timestamps:   true,
	Names:        Names{Text: "transcript", OutputFormat: "output_format", Speed: "generation_config.speed"},
}

// cartesiaSocketRules: a socket message's transcript may be empty, and a
// context that names no language speaks English (Cartesia's default; the
// session engine checks the language before it looks the voice up, so the
// voice's own language cannot stand in, as it does over HTTP).
var cartesiaSocketRules = func() Rules {
	r := CartesiaRules
	r.TextOptional = true
	r.DefaultLanguage = "en"
	return r
}()

// CartesiaRequest is a validated Cartesia request.
type CartesiaRequest struct {
	// Voice is voice.id (or the voice string): a voice id or alias, for
	// Service.Voice.
	Voice   string
	Options Options
	// ContextID is context_id ("" when absent).
	ContextID string
	// Continue, Flush: the socket's context controls.
	Continue, Flush bool
	// MaxBufferDelayMS is max_buffer_delay_ms, -1 when absent.
	MaxBufferDelayMS int
	// Cancel: a socket's {"context_id", "cancel": true}; no other field is
	// read.
	Cancel bool
}

// ParseCartesia validates a Cartesia request body or socket message.
// Fields are checked in a fixed order (context_id, cancel, transcript,
// voice, output_format, language, generation_config, add_timestamps,
// continue, flush, max_buffer_delay_ms), so one body answers one error;
// its Param names the field at fault. Every error is a 400
// *control.Error.
func ParseCartesia(body []byte, kind CartesiaKind) (CartesiaRequest, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return CartesiaRequest{MaxBufferDelayMS: -1}, control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	return parseCartesia(m, kind)
}

func parseCartesia(m map[string]json.RawMessage, kind CartesiaKind) (CartesiaRequest, error) {
	r := &CartesiaRules
	if kind == CartesiaSocket {
		r = &cartesiaSocketRules
	}
	in := CartesiaRequest{Options: r.defaults(), MaxBufferDelayMS: -1}
	o := &in.Options
	if raw := m["context_id"]; !IsNull(raw) {
		id, ok := decodeString(raw)
		if !ok || len(id) > cartesiaMaxContextID {
			return in, fail(control.EInvalidRequest, "context_id", "context_id must be a string of at most %d bytes", cartesiaMaxContextID)
		}
		in.ContextID = id
	}
	if kind == CartesiaSocket {
		cancel, err := Bool("cancel", m["cancel"])
		if err != nil {
			return in, withParam(err, "cancel")
		}
		if cancel {
			if in.ContextID == "" {
				return in, fail(control.EInvalidRequest, "context_id", "cancel needs the context_id of the context to cancel")
			}
			in.Cancel = true
			return in, nil
		}
		if in.ContextID == "" {
			return in, fail(control.EInvalidRequest, "context_id", "context_id is required")
		}
	}
	if raw := m["model_id"]; !IsNull(raw) {
		if _, ok := decodeString(raw); !ok {
			return in, fail(control.EInvalidRequest, "model_id", "model_id must be a string")
		}
	}
	if err := r.text(o, m["transcript"]); err != nil {
		return in, err
	}
	var err error
	if in.Voice, err = cartesiaVoice(m["voice"]); err != nil {
		return in, err
	}
	if err := r.cartesiaFormat(o, m["output_format"], kind); err != nil {
		return in, err
	}
	lang, locale := m["language"], m["locale"]
	if !IsNull(lang) && !IsNull(locale) {
		return in, fail(control.EInvalidLanguage, "locale", "set language or locale, not both")
	}
	if IsNull(lang) {
		lang = locale
	}
	if err := r.language(o, lang); err != nil {
		return in, err
	}
	if err := r.cartesiaGeneration(o, m["generation_config"]); err != nil {
		return in, err
	}
	if kind != CartesiaBytes {
		if o.Timestamps, err = Bool("add_timestamps", m["add_timestamps"]); err != nil {
			return in, withParam(err, "add_timestamps")
		}
	}
	if kind != CartesiaSocket {
		return in, nil
	}
	if in.Continue, err = Bool("continue", m["continue"]); err != nil {
		return in, withParam(err, "continue")
	}
	if in.Flush, err = Bool("flush", m["flush"]); err != nil {
		return in, withParam(err, "flush")
	}
	if raw := m["max_buffer_delay_ms"]; !IsNull(raw) {
		v, ok := integer(raw, 0, CartesiaMaxBufferDelayMS)
		if !ok {
			return in, fail(control.EInvalidRequest, "max_buffer_delay_ms",
				"max_buffer_delay_ms must be an integer from 0 to %d", CartesiaMaxBufferDelayMS)
		}
		in.MaxBufferDelayMS = v
	}
	return in, nil
}

// withParam names the field of a refusal from a helper that does not.
func withParam(err error, param string) error {
	if e, ok := err.(*control.Error); ok && e.Param == "" {
		e.Param = param
	}
	return err
}

// cartesiaVoice reads voice: a string, or an object whose id names the
// voice (mode "id" or absent). Embeddings are refused.
func cartesiaVoice(raw []byte) (string, error) {
	const hint = `voice must be a voice id or alias, or {"mode": "id", "id": "<id or alias>"}`
	if IsNull(raw) {
		return "", fail(control.EInvalidRequest, "voice", "voice is required: %s", hint)
	}
	if s, ok := decodeString(raw); ok {
		if s == "" {
			return "", fail(control.EInvalidRequest, "voice", "voice is required: %s", hint)
		}
		return s, nil
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(raw, &v) != nil || v == nil {
		return "", fail(control.EInvalidRequest, "voice", "%s", hint)
	}
	if mode := v["mode"]; !IsNull(mode) {
		if s, ok := decodeString(mode); !ok || s != "id" {
			return "", fail(control.EInvalidRequest, "voice.mode", `voice.mode must be "id": voices are named, embeddings are not supported`)
		}
	}
	id, ok := decodeString(v["id"])
	if !ok || id == "" {
		return "", fail(control.EInvalidRequest, "voice.id", "voice.id is required: a voice id or alias")
	}
	return id, nil
}

// cartesiaFormat reads output_format: container, encoding and
// sample_rate (the shared 8,000-48,000 Hz rule). bit_rate is accepted
// and ignored (voicesvc's MP3 has its own bit rate).
func (r *Rules) cartesiaFormat(o *Options, raw []byte, kind CartesiaKind) error {
	const param = "output_format"
	if IsNull(raw) {
		return fail(control.EInvalidOutputFormat, param,
			`output_format is required, e.g. {"container": "raw", "encoding": "pcm_s16le", "sample_rate": 24000}`)
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil || f == nil {
		return fail(control.EInvalidOutputFormat, param, "output_format must be an object with container, encoding and sample_rate")
	}
	containers := []string{"raw", "wav", "mp3"}
	if kind != CartesiaBytes {
		containers = containers[:1]
	}
	container := "raw"
	if c := f["container"]; !IsNull(c) {
		s, ok := decodeString(c)
		if !ok || !slices.Contains(containers, s) {
			return fail(control.EInvalidOutputFormat, "output_format.container",
				"output_format.container must be one of %s", strings.Join(containers, ", "))
		}
		container = s
	}
	switch container {
	case "mp3":
		o.Format = codec.MP3
		if err := r.available(o); err != nil {
			return err
		}
	case "wav", "raw":
		names := cartesiaEncodings
		if container == "wav" {
			names = cartesiaWAV
		}
		enc, _ := decodeString(f["encoding"])
		w, ok := lookupWire(names, enc)
		if !ok {
			return fail(control.EInvalidOutputFormat, "output_format.encoding",
				"output_format.encoding of a %s container must be one of %s", container, wireList(names))
		}
		o.Format = w.Format
	}
	if sr := f["sample_rate"]; !IsNull(sr) {
		v, ok := integer(sr, MinSampleRate, MaxSampleRate)
		if !ok {
			return fail(control.EInvalidSampleRate, "output_format.sample_rate",
				"output_format.sample_rate must be an integer from %d to %d", MinSampleRate, MaxSampleRate)
		}
		o.SampleRate = v
	}
	return nil
}

// cartesiaGeneration reads generation_config: speed through the shared
// speed rule, volume through the shared volume rule; emotion is ignored.
func (r *Rules) cartesiaGeneration(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	var g map[string]json.RawMessage
	if json.Unmarshal(raw, &g) != nil || g == nil {
		return fail(control.EInvalidRequest, "generation_config", "generation_config must be an object")
	}
	if err := r.speed(o, g["speed"]); err != nil {
		return err
	}
	return r.volume(o, g["volume"], "generation_config.volume")
}
