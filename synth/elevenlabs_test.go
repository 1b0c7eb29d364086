package synth

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
)

// TestParseElevenLabs: the vendor's body and output_format names over the
// shared rules (docs/dialects.md#elevenlabs).
func TestParseElevenLabs(t *testing.T) {
	for i, tc := range []struct {
		body, format string // format "-": absent
		code, param  string
		want         Options
	}{
		{body: `{"text":"hi"}`, format: "-", want: Options{Text: "hi", Format: codec.MP3, SampleRate: 44100}},
		{body: `{"text":"hi","model_id":"eleven_turbo_v2_5","seed":3,"previous_text":"x"}`, format: "pcm_16000",
			want: Options{Text: "hi", Format: codec.S16LE, SampleRate: 16000}},
		{body: `{"text":"hi","voice_settings":{"stability":0.2,"speed":1.1,"use_speaker_boost":true}}`, format: "ulaw_8000",
			want: Options{Text: "hi", Format: codec.MuLaw, SampleRate: 8000, Speed: ptr(1.1)}},
		{body: `{"text":"hi","voice_settings":null,"language_code":"de"}`, format: "alaw_8000",
			want: Options{Text: "hi", Format: codec.ALaw, SampleRate: 8000, Language: "de"}},
		{body: `{"text":"hi"}`, format: "opus_48000_32", want: Options{Text: "hi", Format: codec.OggOpus, SampleRate: 48000}},
		{body: `{"text":"hi"}`, format: "wav_22050", want: Options{Text: "hi", Format: codec.WAV, SampleRate: 22050}},
		{body: `{"text":"hi"}`, format: "mp3_22050_32", want: Options{Text: "hi", Format: codec.MP3, SampleRate: 22050}},

		{body: `{}`, format: "-", code: control.ETextRequired, param: "text"},
		{body: `{"text":" "}`, format: "-", code: control.ETextRequired, param: "text"},
		{body: `{"text":1}`, format: "-", code: control.EInvalidRequest, param: "text"},
		{body: `[1]`, format: "-", code: control.EInvalidJSON},
		{body: `{"text":`, format: "-", code: control.EInvalidJSON},
		{body: `{"text":"hi","language_code":"?"}`, format: "-", code: control.EInvalidLanguage, param: "language_code"},
		{body: `{"text":"hi"}`, format: "pcm_11025", code: control.EInvalidOutputFormat, param: "output_format"},
		{body: `{"text":"hi"}`, format: "", code: control.EInvalidOutputFormat, param: "output_format"},
		{body: `{"text":"hi","voice_settings":[]}`, format: "-", code: control.EInvalidRequest, param: "voice_settings"},
		{body: `{"text":"hi","voice_settings":{"speed":"1"}}`, format: "-", code: control.EInvalidSpeed, param: "voice_settings.speed"},
		{body: `{"text":"hi","voice_settings":{"speed":0.1}}`, format: "-", code: control.EInvalidSpeed, param: "voice_settings.speed"},
	} {
		var format []byte
		if tc.format != "-" {
			format = []byte(tc.format)
		}
		o, err := ParseElevenLabs([]byte(tc.body), format)
		if tc.code != "" {
			e, ok := err.(*control.Error)
			if !ok || e.Code != tc.code || e.Param != tc.param {
				t.Errorf("%d %s: %v (param %q), want %s on %q", i, tc.body, err, paramOf(err), tc.code, tc.param)
			}
			continue
		}
		if !codec.MP3Available && tc.want.Format == codec.MP3 {
			continue
		}
		want := tc.want
		want.NumStep = DefaultNumStep
		if err != nil || o.Text != want.Text || o.Format != want.Format || o.SampleRate != want.SampleRate ||
			o.Language != want.Language || o.NumStep != want.NumStep || (o.Speed == nil) != (want.Speed == nil) ||
			o.Speed != nil && *o.Speed != *want.Speed {
			t.Errorf("%d %s: %+v %v, want %+v", i, tc.body, o, err, want)
		}
	}
}

func paramOf(err error) string {
	if e, ok := err.(*control.Error); ok {
		return e.Param
	}
	return ""
}

// TestElevenLabsFormatNames: every name of the vendor's enum that voicesvc
// can encode maps to a format of the codec registry at the rate it names.
func TestElevenLabsFormatNames(t *testing.T) {
	if len(ElevenLabsRules.FormatNames) != 28 {
		t.Errorf("%d names, want the client's 28", len(ElevenLabsRules.FormatNames))
	}
	for _, w := range ElevenLabsRules.FormatNames {
		spec, ok := codec.LookupFormat(w.Format)
		if !ok || spec.OutputRate(w.Rate) != w.Rate && w.Format != codec.MP3 {
			t.Errorf("%s: %v at %d", w.Name, w.Format, spec.OutputRate(w.Rate))
		}
		if !strings.Contains(w.Name, "_"+strconv.Itoa(w.Rate)) {
			t.Errorf("%s: rate %d", w.Name, w.Rate)
		}
	}
}

// FuzzParseElevenLabs: never a panic, refusals only with the fields'
// codes, and what it accepts keeps the rules.
func FuzzParseElevenLabs(f *testing.F) {
	for _, s := range [][2]string{{`{"text":"hi"}`, "pcm_16000"}, {`{"text":"a","voice_settings":{"speed":1.2}}`, "ulaw_8000"},
		{`{"text":"\ud83d\ude00","language_code":"en-GB","voice_settings":null}`, "opus_48000_64"}, {`[]`, ""},
		{`{"voice_settings":{"a":[{"speed":1}]},"text":"x"}`, "mp3_44100_128"}} {
		f.Add([]byte(s[0]), s[1])
	}
	f.Fuzz(func(t *testing.T, body []byte, format string) {
		o, err := ParseElevenLabs(body, []byte(format))
		if !json.Valid(body) {
			if !control.IsCode(err, control.EInvalidJSON) {
				t.Fatalf("invalid JSON answered %v", err)
			}
			return
		}
		if err != nil {
			switch control.ErrorCode(err) {
			case control.EInvalidJSON, control.ETextRequired, control.EInvalidRequest, control.ETextTooLong,
				control.EInvalidLanguage, control.EInvalidOutputFormat, control.EInvalidSpeed, control.EUnsupportedFormat:
			default:
				t.Fatalf("refused with a code that is not a field's: %v", err)
			}
			return
		}
		if strings.TrimSpace(o.Text) == "" || utf8.RuneCountInString(o.Text) > MaxTextChars ||
			o.SampleRate < MinSampleRate || o.SampleRate > MaxSampleRate ||
			o.Speed != nil && (*o.Speed < MinSpeed || *o.Speed > MaxSpeed) ||
			o.Language != "" && !wellFormed(o.Language) {
			t.Fatalf("accepted out-of-rule options %+v", o)
		}
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			var std string
			if json.Unmarshal(m["text"], &std) != nil || std != o.Text {
				t.Fatalf("text %q, encoding/json reads %q", o.Text, std)
			}
		}
	})
}
