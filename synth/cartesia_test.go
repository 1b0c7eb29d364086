package synth

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
)

// TestParseCartesia: the Cartesia dialect's bodies and socket messages
// (docs/dialects.md#cartesia) as its official clients send them, and each
// refusal with its code and field.
func TestParseCartesia(t *testing.T) {
	const raw16 = `"output_format":{"container":"raw","encoding":"pcm_s16le","sample_rate":16000}`
	cases := []struct {
		name      string
		kind      CartesiaKind
		body      string
		code      string // "" accepted
		param     string
		voice     string
		format    codec.Format
		rate      int
		check     func(t *testing.T, in CartesiaRequest)
		formatErr string
	}{
		{name: "cartesia-js bytes, wav", kind: CartesiaBytes,
			body:  `{"model_id":"sonic-3","transcript":"Hi.","voice":{"mode":"id","id":"v1"},"output_format":{"container":"wav","encoding":"pcm_s16le","sample_rate":44100}}`,
			voice: "v1", format: codec.WAV, rate: 44100},
		{name: "voice as a string, f32le", kind: CartesiaBytes,
			body:  `{"transcript":"Hi.","voice":"alias-1","output_format":{"container":"raw","encoding":"pcm_f32le","sample_rate":8000}}`,
			voice: "alias-1", format: codec.F32LE, rate: 8000},
		{name: "mulaw", kind: CartesiaBytes, body: `{"transcript":"Hi.","voice":"v","output_format":{"container":"raw","encoding":"pcm_mulaw","sample_rate":8000}}`,
			voice: "v", format: codec.MuLaw, rate: 8000},
		{name: "alaw", kind: CartesiaBytes, body: `{"transcript":"Hi.","voice":"v","output_format":{"container":"raw","encoding":"pcm_alaw","sample_rate":8000}}`,
			voice: "v", format: codec.ALaw, rate: 8000},
		{name: "mp3, bit_rate ignored", kind: CartesiaBytes,
			body:  `{"transcript":"Hi.","voice":"v","output_format":{"container":"mp3","sample_rate":44100,"bit_rate":128000}}`,
			voice: "v", format: codec.MP3, rate: 44100},
		{name: "LiveKit's plugin: language, buffer delay, generation_config", kind: CartesiaSocket,
			body: `{"model_id":"sonic-3","voice":{"mode":"id","id":"v"},"output_format":{"container":"raw","encoding":"pcm_s16le","sample_rate":24000},` +
				`"language":"en","max_buffer_delay_ms":0,"generation_config":{"speed":1.2,"volume":1.5,"emotion":"calm"},"context_id":"c1","transcript":"Hello ","continue":true,"add_timestamps":true}`,
			voice: "v", format: codec.S16LE, rate: 24000, check: func(t *testing.T, in CartesiaRequest) {
				o := in.Options
				if in.ContextID != "c1" || !in.Continue || in.Flush || in.MaxBufferDelayMS != 0 || !o.Timestamps ||
					o.Language != "en" || *o.Speed != 1.2 || *o.Volume != 1.5 || o.Text != "Hello " {
					t.Fatalf("%+v %+v", in, o)
				}
			}},
		{name: "a flush: empty transcript on the socket", kind: CartesiaSocket,
			body:  `{"context_id":"c","transcript":"","continue":true,"flush":true,"voice":"v",` + raw16 + `}`,
			voice: "v", format: codec.S16LE, rate: 16000, check: func(t *testing.T, in CartesiaRequest) {
				if !in.Flush || in.MaxBufferDelayMS != -1 {
					t.Fatalf("%+v", in)
				}
			}},
		{name: "cancel reads nothing else", kind: CartesiaSocket, body: `{"context_id":"c","cancel":true,"voice":7}`,
			check: func(t *testing.T, in CartesiaRequest) {
				if !in.Cancel || in.ContextID != "c" {
					t.Fatalf("%+v", in)
				}
			}},
		{name: "locale", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","locale":"en-gb",` + raw16 + `}`,
			voice: "v", format: codec.S16LE, rate: 16000, check: func(t *testing.T, in CartesiaRequest) {
				if in.Options.Language != "en-GB" {
					t.Fatal(in.Options.Language)
				}
			}},

		{name: "not an object", kind: CartesiaBytes, body: `[1]`, code: control.EInvalidJSON},
		{name: "no transcript", kind: CartesiaBytes, body: `{"voice":"v",` + raw16 + `}`, code: control.ETextRequired, param: "transcript"},
		{name: "blank transcript over HTTP", kind: CartesiaSSE, body: `{"transcript":" ","voice":"v",` + raw16 + `}`, code: control.ETextRequired, param: "transcript"},
		{name: "transcript not a string", kind: CartesiaBytes, body: `{"transcript":5,"voice":"v",` + raw16 + `}`, code: control.EInvalidRequest, param: "transcript"},
		{name: "too long", kind: CartesiaBytes, body: `{"transcript":"` + strings.Repeat("a", MaxTextChars+1) + `","voice":"v",` + raw16 + `}`,
			code: control.ETextTooLong, param: "transcript"},
		{name: "no voice", kind: CartesiaBytes, body: `{"transcript":"x",` + raw16 + `}`, code: control.EInvalidRequest, param: "voice"},
		{name: "an embedding", kind: CartesiaBytes, body: `{"transcript":"x","voice":{"mode":"embedding","embedding":[0.1]},` + raw16 + `}`,
			code: control.EInvalidRequest, param: "voice.mode"},
		{name: "voice object without id", kind: CartesiaBytes, body: `{"transcript":"x","voice":{"mode":"id"},` + raw16 + `}`,
			code: control.EInvalidRequest, param: "voice.id"},
		{name: "no output_format", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v"}`, code: control.EInvalidOutputFormat, param: "output_format"},
		{name: "ogg container", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","output_format":{"container":"ogg"}}`,
			code: control.EInvalidOutputFormat, param: "output_format.container", formatErr: "raw, wav, mp3"},
		{name: "wav on SSE", kind: CartesiaSSE, body: `{"transcript":"x","voice":"v","output_format":{"container":"wav","encoding":"pcm_s16le"}}`,
			code: control.EInvalidOutputFormat, param: "output_format.container", formatErr: "one of raw"},
		{name: "float wav", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","output_format":{"container":"wav","encoding":"pcm_f32le"}}`,
			code: control.EInvalidOutputFormat, param: "output_format.encoding", formatErr: "pcm_s16le"},
		{name: "unknown encoding", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","output_format":{"container":"raw","encoding":"pcm_s24le"}}`,
			code: control.EInvalidOutputFormat, param: "output_format.encoding", formatErr: "pcm_s16le, pcm_f32le, pcm_mulaw, pcm_alaw"},
		{name: "rate out of range", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","output_format":{"container":"raw","encoding":"pcm_s16le","sample_rate":96000}}`,
			code: control.EInvalidSampleRate, param: "output_format.sample_rate"},
		{name: "language and locale", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","language":"en","locale":"en-US",` + raw16 + `}`,
			code: control.EInvalidLanguage, param: "locale"},
		{name: "bad speed", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","generation_config":{"speed":9},` + raw16 + `}`,
			code: control.EInvalidSpeed, param: "generation_config.speed"},
		{name: "bad volume", kind: CartesiaBytes, body: `{"transcript":"x","voice":"v","generation_config":{"volume":"loud"},` + raw16 + `}`,
			code: control.EInvalidRequest, param: "generation_config.volume"},
		{name: "model_id not a string", kind: CartesiaBytes, body: `{"model_id":1,"transcript":"x","voice":"v",` + raw16 + `}`,
			code: control.EInvalidRequest, param: "model_id"},
		{name: "socket message without context", kind: CartesiaSocket, body: `{"transcript":"x","voice":"v",` + raw16 + `}`,
			code: control.EInvalidRequest, param: "context_id"},
		{name: "cancel without context", kind: CartesiaSocket, body: `{"cancel":true}`, code: control.EInvalidRequest, param: "context_id"},
		{name: "continue not a bool", kind: CartesiaSocket, body: `{"context_id":"c","transcript":"x","voice":"v","continue":"yes",` + raw16 + `}`,
			code: control.EInvalidRequest, param: "continue"},
		{name: "buffer delay out of range", kind: CartesiaSocket, body: `{"context_id":"c","transcript":"x","voice":"v","max_buffer_delay_ms":5001,` + raw16 + `}`,
			code: control.EInvalidRequest, param: "max_buffer_delay_ms"},
		{name: "context id too long", kind: CartesiaSocket, body: `{"context_id":"` + strings.Repeat("c", 257) + `","cancel":true}`,
			code: control.EInvalidRequest, param: "context_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in, err := ParseCartesia([]byte(tc.body), tc.kind)
			if tc.code != "" {
				e, ok := err.(*control.Error)
				if !ok || e.Code != tc.code || e.Param != tc.param {
					t.Fatalf("got %#v, want %s on %q", err, tc.code, tc.param)
				}
				if tc.formatErr != "" && !strings.Contains(e.Message, tc.formatErr) {
					t.Fatalf("message %q does not name %q", e.Message, tc.formatErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if in.Voice != tc.voice || tc.format != "" && (in.Options.Format != tc.format || in.Options.SampleRate != tc.rate) {
				t.Fatalf("voice %q format %s at %d", in.Voice, in.Options.Format, in.Options.SampleRate)
			}
			if tc.check != nil {
				tc.check(t, in)
			}
		})
	}
}

// FuzzParseCartesia: the socket's message parser (and the HTTP bodies')
// never panics, refuses only with 400 codes, and what it accepts keeps the
// rules: a known format at an allowed rate, a bounded transcript, a
// context on every socket message.
func FuzzParseCartesia(f *testing.F) {
	for _, s := range []string{
		`{"context_id":"c","transcript":"Hello ","continue":true,"voice":{"mode":"id","id":"v"},"output_format":{"container":"raw","encoding":"pcm_s16le","sample_rate":24000},"max_buffer_delay_ms":0}`,
		`{"context_id":"c","cancel":true}`,
		`{"context_id":"c","transcript":"","flush":true,"continue":true,"voice":"v","output_format":{"container":"raw","encoding":"pcm_mulaw","sample_rate":8000}}`,
		`{"transcript":"x","voice":"v","output_format":{"container":"mp3","sample_rate":44100},"generation_config":{"speed":1,"volume":1}}`,
		`[]`, `{"voice":{"id":null}}`, `{"output_format":[]}`,
	} {
		f.Add([]byte(s), uint8(CartesiaSocket))
		f.Add([]byte(s), uint8(CartesiaBytes))
	}
	f.Fuzz(func(t *testing.T, body []byte, k uint8) {
		kind := CartesiaKind(k % 3)
		in, err := ParseCartesia(body, kind)
		if err != nil {
			e, ok := err.(*control.Error)
			if !ok {
				t.Fatalf("not a control error: %v", err)
			}
			switch e.Code {
			case control.EInvalidJSON, control.ETextRequired, control.EInvalidRequest, control.ETextTooLong, control.EInvalidLanguage,
				control.EInvalidOutputFormat, control.EInvalidSampleRate, control.EInvalidSpeed, control.EUnsupportedFormat:
			default:
				t.Fatalf("refused with a code that is not a field's: %v", err)
			}
			if e.Code != control.EInvalidJSON && e.Param == "" {
				t.Fatalf("a refusal names no field: %v", err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if kind == CartesiaSocket && in.ContextID == "" {
			t.Fatal("a socket message without context_id")
		}
		if in.Cancel {
			return
		}
		o := in.Options
		if utf8.RuneCountInString(o.Text) > MaxTextChars || kind != CartesiaSocket && strings.TrimSpace(o.Text) == "" ||
			o.SampleRate < MinSampleRate || o.SampleRate > MaxSampleRate || in.Voice == "" ||
			in.MaxBufferDelayMS < -1 || in.MaxBufferDelayMS > CartesiaMaxBufferDelayMS ||
			o.Speed != nil && (*o.Speed < MinSpeed || *o.Speed > MaxSpeed) ||
			o.Volume != nil && (*o.Volume < MinVolume || *o.Volume > MaxVolume) {
			t.Fatalf("accepted out-of-rule request %+v %+v", in, o)
		}
		switch o.Format {
		case codec.S16LE, codec.F32LE, codec.MuLaw, codec.ALaw:
		case codec.WAV, codec.MP3:
			if kind != CartesiaBytes {
				t.Fatalf("%s on a raw-only surface", o.Format)
			}
		default:
			t.Fatalf("format %s", o.Format)
		}
	})
}
