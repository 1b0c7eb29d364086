package synth

import (
	"encoding/json"

	"voicesvc/codec"
	"voicesvc/control"
)

// OpenAIRules are the compatible endpoint's (docs/api.md#compatible-speech):
// its field and format names over the shared rules. "opus" is an Ogg Opus
// file (what its clients expect), not the WebSocket's bare packets; "pcm"
// is s16le at 24000 Hz.
var OpenAIRules = Rules{
	Format: codec.MP3,
	FormatNames: []WireFormat{
		{Name: "mp3", Format: codec.MP3}, {Name: "opus", Format: codec.OggOpus}, {Name: "flac", Format: codec.FLAC},
		{Name: "wav", Format: codec.WAV}, {Name: "pcm", Format: codec.S16LE},
	},
	MaxTextChars: MaxTextChars,
	Speed:        true,
	Names:        Names{Text: "input", OutputFormat: "response_format"},
}

// OpenAISpeech is a validated compatible-endpoint body.
type OpenAISpeech struct {
	Voice   string // alias or id, for Service.Voice
	Options Options
	SSE     bool // stream_format "sse"
}

// ParseOpenAI validates a POST /compat/audio/speech body:
//
//	{"model": "service-v1", "voice": "<alias or id>", "input": "...",
//	 "response_format": "mp3" | "opus" | "flac" | "wav" | "pcm",
//	 "speed": 0.25-4, "stream_format": "audio" | "sse", "language": "en"}
//
// model is required and any value routes to the one model; instructions and
// unknown fields are ignored. Fields are checked in a fixed order (model,
// input, voice, response_format, speed, stream_format, language) so that
// one body always answers one error; its Param names the field at fault.
func ParseOpenAI(body []byte) (OpenAISpeech, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return OpenAISpeech{}, control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	r := &OpenAIRules
	in := OpenAISpeech{Options: r.defaults()}
	o := &in.Options
	if err := required(m["model"], "model", "model must be a string", `model is required; use "service-v1"`); err != nil {
		return in, err
	}
	if err := r.text(o, m["input"]); err != nil {
		return in, err
	}
	const voiceHint = "a voice alias or id"
	if err := required(m["voice"], "voice", "voice must be a string: "+voiceHint, "voice is required: "+voiceHint); err != nil {
		return in, err
	}
	in.Voice, _ = decodeString(m["voice"])
	if err := r.format(o, m["response_format"]); err != nil {
		return in, err
	}
	if err := r.available(o); err != nil { // the default, mp3, too
		return in, err
	}
	if err := r.speed(o, m["speed"]); err != nil {
		return in, err
	}
	switch sf, ok := decodeString(m["stream_format"]); {
	case IsNull(m["stream_format"]):
	case !ok || sf != "audio" && sf != "sse":
		return in, fail(control.EInvalidRequest, "stream_format", `stream_format must be "audio" or "sse"`)
	case sf == "sse":
		in.SSE = true
	}
	return in, r.language(o, m["language"])
}

// required checks a string field that must be present and not empty.
func required(raw []byte, name, notString, missing string) error {
	if IsNull(raw) {
		return fail(control.EInvalidRequest, name, "%s", missing)
	}
	s, ok := decodeString(raw)
	switch {
	case !ok:
		return fail(control.EInvalidRequest, name, "%s", notString)
	case s == "":
		return fail(control.EInvalidRequest, name, "%s", missing)
	}
	return nil
}
