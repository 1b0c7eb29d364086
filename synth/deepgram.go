package synth

import (
	"strings"

	"voicesvc/codec"
	"voicesvc/control"
)

// The Deepgram dialect's fields (docs/dialects.md#deepgram): Aura's speak
// API names its voice `model` and its format by `encoding`, `container`,
// `sample_rate` and `bit_rate`, all query parameters; the REST body is
// {"text": "..."}. These are the core's rules under those names, so the
// dialect package only reads the wire.

// DeepgramDefaultModel is the model of a request that names none (the
// vendor's documented default). Like any model it must be a voice's name
// in the workspace to be spoken with.
const DeepgramDefaultModel = "aura-asteria-en"

// MaxDeepgramBitRate bounds bit_rate (the vendor's widest range, Opus's,
// ends at 650000).
const MaxDeepgramBitRate = 1_000_000

// DeepgramQuery is the query of a speak request or socket, as raw values:
// nil is an absent parameter, an empty slice a present empty one. Numbers
// are read as JSON numbers ("24000"), strings as they are.
type DeepgramQuery struct {
	Model, Encoding, Container, SampleRate, BitRate, Speed, Callback []byte
}

// DeepgramSpeech is a validated Deepgram request.
type DeepgramSpeech struct {
	// Model is the voice name (id, workspace alias or catalog alias).
	Model   string
	Options Options
	// G711WAV: the G.711 samples (Options.Format mulaw or alaw) go out in
	// a WAV container (codec.AppendG711WAVHeader), the vendor's default
	// for those encodings.
	G711WAV bool
}

// deepgramEncoding is one `encoding` value: its format for each container
// it takes (the first is the default), its default sample rate, and
// whether the socket streams it.
type deepgramEncoding struct {
	name       string
	containers []deepgramContainer
	rate       int
	socket     bool
}

type deepgramContainer struct {
	name    string
	format  codec.Format
	g711WAV bool
}

// deepgramEncodings are the vendor's encodings voicesvc makes (aac it
// does not: unsupported_response_format). Default rates are the vendor's:
// 8000 for the telephony codecs, 24000 for the others where a rate is
// asked, the codec's own for mp3 (22050) and opus (48000).
var deepgramEncodings = []deepgramEncoding{
	{"linear16", []deepgramContainer{{"wav", codec.WAV, false}, {"none", codec.S16LE, false}}, 24000, true},
	{"mulaw", []deepgramContainer{{"wav", codec.MuLaw, true}, {"none", codec.MuLaw, false}}, 8000, true},
	{"alaw", []deepgramContainer{{"wav", codec.ALaw, true}, {"none", codec.ALaw, false}}, 8000, true},
	{"mp3", []deepgramContainer{{"none", codec.MP3, false}}, 22050, false},
	{"opus", []deepgramContainer{{"ogg", codec.OggOpus, false}}, codec.OpusRate, false},
	{"flac", []deepgramContainer{{"none", codec.FLAC, false}}, 24000, false},
}

// DeepgramRules are the shared rules under the dialect's names: the text
// of the REST body, the speed multiplier (query `speed`, the core's range).
var DeepgramRules = Rules{
	MaxTextChars: MaxTextChars,
	Speed:        true,
	Names:        Names{Text: "text", OutputFormat: "encoding"},
}

// ParseDeepgramSpeak validates POST /v1/speak: the query and the body
// {"text": "..."} (other body keys are ignored). Checked in a fixed order
// (callback, model, text, encoding, container, sample_rate, bit_rate,
// speed) so one request answers one error; its Param names the field.
func ParseDeepgramSpeak(q *DeepgramQuery, body []byte) (DeepgramSpeech, error) {
	f, err := Scan(body)
	if err != nil {
		return DeepgramSpeech{}, err
	}
	return parseDeepgram(q, f.Text, false)
}

// ParseDeepgramSocket validates the query of the speak socket: its
// encodings are the raw ones (linear16, mulaw, alaw) with no container.
// The text comes later, in Speak messages.
func ParseDeepgramSocket(q *DeepgramQuery) (DeepgramSpeech, error) {
	return parseDeepgram(q, nil, true)
}

func parseDeepgram(q *DeepgramQuery, text []byte, socket bool) (DeepgramSpeech, error) {
	r := &DeepgramRules
	in := DeepgramSpeech{Options: r.defaults()}
	o := &in.Options
	if q.Callback != nil {
		// The vendor answers a callback request at once and posts the
		// audio later; voicesvc answers with the audio, so it says no
		// rather than ignore where the client waits for it.
		return in, fail(control.EInvalidRequest, "callback", "callback is not supported: the audio is the response body")
	}
	in.Model = DeepgramDefaultModel
	if q.Model != nil {
		if len(q.Model) == 0 {
			return in, fail(control.EInvalidRequest, "model", "model must name a voice")
		}
		in.Model = string(q.Model)
	}
	if !socket {
		if err := r.text(o, text); err != nil {
			return in, err
		}
	}
	enc, err := deepgramEncodingOf(q.Encoding, socket)
	if err != nil {
		return in, err
	}
	c, err := enc.container(q.Container, socket)
	if err != nil {
		return in, err
	}
	o.Format, in.G711WAV = c.format, c.g711WAV
	o.SampleRate = enc.rate
	if err := r.sampleRate(o, q.SampleRate); err != nil {
		return in, err
	}
	if spec, ok := codec.LookupFormat(o.Format); ok {
		o.SampleRate = spec.OutputRate(o.SampleRate) // mp3's MPEG rates, Ogg Opus's 48000
	}
	if q.BitRate != nil {
		// Read for its type and range, then left to the encoders, whose
		// bitrates are fixed (docs/dialects.md#deepgram).
		if _, ok := integer(q.BitRate, 1, MaxDeepgramBitRate); !ok {
			return in, fail(control.EInvalidRequest, "bit_rate", "bit_rate must be an integer from 1 to %d", MaxDeepgramBitRate)
		}
	}
	return in, r.speed(o, q.Speed)
}

func deepgramEncodingOf(raw []byte, socket bool) (*deepgramEncoding, error) {
	name := "linear16"
	if raw != nil {
		name = string(raw)
	}
	for i := range deepgramEncodings {
		e := &deepgramEncodings[i]
		if e.name != name {
			continue
		}
		if socket && !e.socket {
			break
		}
		if e.containers[0].format == codec.MP3 && !codec.MP3Available {
			return nil, fail(control.EUnsupportedFormat, "encoding",
				"this deployment has no MP3 encoder; encoding must be one of %s", deepgramEncodingList(socket, false))
		}
		return e, nil
	}
	code := control.EInvalidOutputFormat
	if name == "aac" && !socket {
		code = control.EUnsupportedFormat // the vendor's, not voicesvc's
	}
	return nil, fail(code, "encoding", "encoding must be one of %s", deepgramEncodingList(socket, codec.MP3Available))
}

// container is the format of c (absent: the encoding's default).
func (e *deepgramEncoding) container(raw []byte, socket bool) (deepgramContainer, error) {
	if socket {
		// The socket streams raw samples only; "none" is the one
		// container it names.
		if raw != nil && string(raw) != "none" {
			return deepgramContainer{}, fail(control.EInvalidRequest, "container", `container must be "none" on the socket`)
		}
		return e.containers[len(e.containers)-1], nil
	}
	if raw == nil {
		return e.containers[0], nil
	}
	for _, c := range e.containers {
		if c.name == string(raw) {
			return c, nil
		}
	}
	names := make([]string, len(e.containers))
	for i, c := range e.containers {
		names[i] = c.name
	}
	return deepgramContainer{}, fail(control.EInvalidRequest, "container",
		"container must be %s for encoding %s", strings.Join(names, " or "), e.name)
}

// deepgramEncodingList names the encodings offered, for an error message.
func deepgramEncodingList(socket, mp3 bool) string {
	var names []string
	for _, e := range deepgramEncodings {
		if socket && !e.socket || e.name == "mp3" && !mp3 {
			continue
		}
		names = append(names, e.name)
	}
	return strings.Join(names, ", ")
}

// deepgramSocketRules: a Speak message's text may be empty (it adds
// nothing) and is bounded like any request's.
var deepgramSocketRules = Rules{TextOptional: true, MaxTextChars: MaxTextChars, Names: Names{Text: "text"}}

// DeepgramSpeakText validates the text of a socket's Speak message (a raw
// JSON value, Fields.Text): a string of at most MaxTextChars code points;
// absent, null or empty is "".
func DeepgramSpeakText(raw []byte) (string, error) {
	var o Options
	err := deepgramSocketRules.text(&o, raw)
	return o.Text, err
}
