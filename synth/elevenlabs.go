package synth

import (
	"encoding/json"
	"strconv"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/jsonw"
)

// The ElevenLabs dialect's rules (docs/dialects.md#elevenlabs): its field
// and format names over the shared rules, so that a limit or a range is
// still written once.

// ElevenLabsDefaultFormat is the output_format of a request that names
// none: the vendor's default.
const ElevenLabsDefaultFormat = "mp3_44100_128"

// ElevenLabsRules are the text-to-speech endpoints'. output_format names
// carry the rate (and, for MP3 and Opus, a bitrate that voicesvc's
// constant-bitrate encoders do not take: the name is accepted and the
// server's bitrate used). opus_48000_* is an Ogg Opus file, what the vendor
// sends; ulaw and alaw are G.711 at 8 kHz.
var ElevenLabsRules = Rules{
	Format:       codec.MP3,
	FormatNames:  elevenLabsFormats(),
	MaxTextChars: MaxTextChars,
	Speed:        true,
	Names:        Names{Text: "text", Language: "language_code", OutputFormat: "output_format", Speed: "voice_settings.speed"},
}

// elevenLabsFormats lists the output_format names of the vendor's API
// reference (those of @elevenlabs/elevenlabs-js 2.73.0's enum).
func elevenLabsFormats() []WireFormat {
	var f []WireFormat
	add := func(prefix string, fm codec.Format, rate int, suffixes ...string) {
		name := prefix + "_" + strconv.Itoa(rate)
		if len(suffixes) == 0 {
			f = append(f, WireFormat{Name: name, Format: fm, Rate: rate})
		}
		for _, s := range suffixes {
			f = append(f, WireFormat{Name: name + "_" + s, Format: fm, Rate: rate})
		}
	}
	add("mp3", codec.MP3, 22050, "32")
	add("mp3", codec.MP3, 24000, "48")
	add("mp3", codec.MP3, 44100, "32", "64", "96", "128", "192")
	for _, r := range []int{8000, 16000, 22050, 24000, 32000, 44100, 48000} {
		add("pcm", codec.S16LE, r)
	}
	add("ulaw", codec.MuLaw, 8000)
	add("alaw", codec.ALaw, 8000)
	add("opus", codec.OggOpus, codec.OpusRate, "32", "64", "96", "128", "192")
	for _, r := range []int{8000, 16000, 22050, 24000, 32000, 44100, 48000} {
		add("wav", codec.WAV, r)
	}
	return f
}

// ParseElevenLabs validates a text-to-speech body with the output_format of
// the request's query (nil: absent):
//
//	{"text": "...", "model_id": "...", "language_code": "en",
//	 "voice_settings": {"speed": 0.25-4, "stability": ..., ...}, ...}
//
// model_id and every other field (seed, previous_text,
// apply_text_normalization, pronunciation dictionaries, ...) are accepted
// and ignored; of voice_settings only speed means what voicesvc's speed
// means, the others (stability, similarity_boost, style,
// use_speaker_boost) are ignored. Fields are checked in a fixed order
// (text, language_code, output_format, voice_settings) so one request
// answers one error; Param names the field at fault.
func ParseElevenLabs(body, outputFormat []byte) (Options, error) {
	r := &ElevenLabsRules
	o := r.defaults()
	f, err := Scan(body)
	if err != nil {
		return o, err
	}
	if err := r.text(&o, f.Text); err != nil {
		return o, err
	}
	lang, err := elevenLabsField(body, "language_code")
	if err != nil {
		return o, err
	}
	if err := r.language(&o, lang); err != nil {
		return o, err
	}
	name := ElevenLabsDefaultFormat
	if outputFormat != nil {
		name = string(outputFormat)
	}
	if err := r.FormatName(&o, name); err != nil {
		return o, err
	}
	return o, r.voiceSettings(&o, body)
}

// voiceSettings reads voice_settings: an object or null; its speed is the
// shared speed rule.
func (r *Rules) voiceSettings(o *Options, body []byte) error {
	raw, err := elevenLabsField(body, "voice_settings")
	if err != nil || IsNull(raw) {
		return err
	}
	if raw[0] != '{' {
		return fail(control.EInvalidRequest, "voice_settings", "voice_settings must be an object")
	}
	speed, err := elevenLabsField(raw, "speed")
	if err != nil {
		return err
	}
	return r.speed(o, speed)
}

// elevenLabsField is the raw value of key in the JSON object body (valid
// already: Scan checked it), nil when absent.
func elevenLabsField(body []byte, key string) ([]byte, error) {
	var raw []byte
	found := walkObject(body, func(k, v []byte) {
		if string(k) == key {
			raw = v
		}
	})
	if !found {
		return nil, control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	return raw, nil
}

// ParseElevenLabsSocket validates the options a stream-input socket's URL
// names: output_format (nil: the default) and language_code (nil: the
// voice's language), as the HTTP endpoints take them.
func ParseElevenLabsSocket(outputFormat, languageCode []byte) (Options, error) {
	r := &ElevenLabsRules
	o := r.defaults()
	if languageCode != nil {
		if err := r.language(&o, jsonw.AppendString(nil, string(languageCode))); err != nil {
			return o, err
		}
	}
	name := ElevenLabsDefaultFormat
	if outputFormat != nil {
		name = string(outputFormat)
	}
	return o, r.FormatName(&o, name)
}

// ElevenLabsVoiceSettings applies the voice_settings object of a socket's
// first message (raw JSON; absent or null: nothing) to o: its speed, by
// the shared rule; the rest is ignored.
func ElevenLabsVoiceSettings(o *Options, raw []byte) error {
	if IsNull(raw) {
		return nil
	}
	if !json.Valid(raw) || raw[0] != '{' {
		return fail(control.EInvalidRequest, "voice_settings", "voice_settings must be an object")
	}
	speed, err := elevenLabsField(raw, "speed")
	if err != nil {
		return err
	}
	return ElevenLabsRules.speed(o, speed)
}
