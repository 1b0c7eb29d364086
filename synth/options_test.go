package synth

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/langtag"
)

func TestParseCodes(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		stream bool // ParseStream instead of ParseSpeak
		code   string
	}{
		{"not json", `{"text":`, false, control.EInvalidJSON},
		{"empty body", ``, false, control.EInvalidJSON},
		{"garbage", `hello`, false, control.EInvalidJSON},
		{"trailing garbage", `{"text":"hi"} x`, false, control.EInvalidJSON},
		{"array", `["text"]`, false, control.EInvalidJSON},
		{"string body", `"hi"`, false, control.EInvalidJSON},
		{"null body", `null`, false, control.EInvalidJSON},
		{"missing text", `{}`, false, control.ETextRequired},
		{"null text", `{"text":null}`, false, control.ETextRequired},
		{"empty text", `{"text":""}`, false, control.ETextRequired},
		{"blank text", `{"text":" \n\t "}`, true, control.ETextRequired},
		{"numeric text", `{"text":42}`, false, control.EInvalidRequest},
		{"object text", `{"text":{"a":1}}`, false, control.EInvalidRequest},
		{"too long", `{"text":"` + strings.Repeat("a", 10_001) + `"}`, false, control.ETextTooLong},
		{"too long hindi", `{"text":"` + strings.Repeat("न", 10_001) + `"}`, true, control.ETextTooLong},
		{"language number", `{"text":"hi","language":5}`, false, control.EInvalidLanguage},
		{"language malformed", `{"text":"hi","language":"en_US"}`, false, control.EInvalidLanguage},
		{"language too long subtag", `{"text":"hi","language":"englishlanguage"}`, false, control.EInvalidLanguage},
		{"format upper", `{"text":"hi","output_format":"WAV"}`, false, control.EInvalidOutputFormat},
		{"format mp3 speak", `{"text":"hi","output_format":"mp3"}`, false, control.EInvalidOutputFormat},
		{"format opus speak", `{"text":"hi","output_format":"opus"}`, false, control.EInvalidOutputFormat},
		{"format pcm speak", `{"text":"hi","output_format":"pcm"}`, false, control.EInvalidOutputFormat},
		{"format empty", `{"text":"hi","output_format":""}`, false, control.EInvalidOutputFormat},
		{"format number", `{"text":"hi","output_format":16}`, false, control.EInvalidOutputFormat},
		{"wav on sse", `{"text":"hi","output_format":"wav"}`, true, control.EInvalidOutputFormat},
		{"mp3 on sse", `{"text":"hi","output_format":"mp3"}`, true, control.EInvalidOutputFormat},
		{"rate string", `{"text":"hi","sample_rate":"24000"}`, false, control.EInvalidSampleRate},
		{"rate fraction", `{"text":"hi","sample_rate":24000.5}`, false, control.EInvalidSampleRate},
		{"rate low", `{"text":"hi","sample_rate":7999}`, false, control.EInvalidSampleRate},
		{"rate high", `{"text":"hi","sample_rate":48001}`, true, control.EInvalidSampleRate},
		{"rate zero", `{"text":"hi","sample_rate":0}`, false, control.EInvalidSampleRate},
		{"rate negative", `{"text":"hi","sample_rate":-24000}`, false, control.EInvalidSampleRate},
		{"rate bool", `{"text":"hi","sample_rate":true}`, false, control.EInvalidSampleRate},
		{"rate huge", `{"text":"hi","sample_rate":1e999}`, false, control.EInvalidSampleRate},
		{"num_step high", `{"text":"hi","num_step":33}`, false, control.EInvalidNumStep},
		{"num_step zero", `{"text":"hi","num_step":0}`, true, control.EInvalidNumStep},
		{"num_step string", `{"text":"hi","num_step":"8"}`, false, control.EInvalidNumStep},
		{"num_step fraction", `{"text":"hi","num_step":8.5}`, false, control.EInvalidNumStep},
		{"expressiveness high", `{"text":"hi","expressiveness":1.01}`, false, control.EInvalidExpressive},
		{"expressiveness negative", `{"text":"hi","expressiveness":-0.1}`, true, control.EInvalidExpressive},
		{"expressiveness string", `{"text":"hi","expressiveness":"0.5"}`, false, control.EInvalidExpressive},
		{"expressiveness array", `{"text":"hi","expressiveness":[0.5]}`, false, control.EInvalidExpressive},
		{"speed low", `{"text":"hi","speed":0.24}`, false, control.EInvalidSpeed},
		{"speed high", `{"text":"hi","speed":4.01}`, true, control.EInvalidSpeed},
		{"speed zero", `{"text":"hi","speed":0}`, false, control.EInvalidSpeed},
		{"speed negative", `{"text":"hi","speed":-1}`, true, control.EInvalidSpeed},
		{"speed string", `{"text":"hi","speed":"fast"}`, false, control.EInvalidSpeed},
		{"speed numeric string", `{"text":"hi","speed":"1.5"}`, true, control.EInvalidSpeed},
		{"speed bool", `{"text":"hi","speed":true}`, false, control.EInvalidSpeed},
		{"speed huge", `{"text":"hi","speed":1e999}`, false, control.EInvalidSpeed},
		{"mulaw upper", `{"text":"hi","output_format":"MULAW"}`, false, control.EInvalidOutputFormat},
		{"ulaw is not a name", `{"text":"hi","output_format":"ulaw"}`, true, control.EInvalidOutputFormat},
		// One body, one code: text is checked first whatever the key order.
		{"order", `{"sample_rate":"x","text":""}`, false, control.ETextRequired},
		// Keys are exact: "Text" is an unknown field, so text is missing.
		{"key case", `{"Text":"hi"}`, false, control.ETextRequired},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := ParseSpeak
			if tc.stream {
				parse = ParseStream
			}
			_, err := parse([]byte(tc.body))
			e := control.AsError(err)
			if e.Code != tc.code || e.Message == "" {
				t.Fatalf("got %v, want %s", err, tc.code)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	half := 0.5
	tests := []struct {
		name   string
		body   string
		stream bool
		want   Options
	}{
		{"defaults speak", `{"text":"Hello."}`, false,
			Options{Text: "Hello.", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"defaults stream", `{"text":"Hello."}`, true,
			Options{Text: "Hello.", Format: codec.F32LE, SampleRate: 24000, NumStep: 32}},
		{"all fields", `{"text":"नमस्ते","language":"hi-IN","output_format":"s24le","sample_rate":8000,"num_step":1,"expressiveness":0.5}`, false,
			Options{Text: "नमस्ते", Language: "hi-IN", Format: codec.S24LE, SampleRate: 8000, NumStep: 1, Expressiveness: &half}},
		{"integral float and exponent", `{"text":"a","sample_rate":4.8e4,"num_step":32.0,"expressiveness":1}`, true,
			Options{Text: "a", Format: codec.F32LE, SampleRate: 48000, NumStep: 32, Expressiveness: ptr(1.0)}},
		{"nulls are absent", `{"text":"a","language":null,"output_format":null,"sample_rate":null,"num_step":null,"expressiveness":null}`, false,
			Options{Text: "a", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"unknown fields and whitespace", " {\n \"voice\": {\"x\": [1, \"}\"]}, \"text\" : \"a\\\"b\\u00e9\" , \"pace\": \"fast\" }\n", false,
			Options{Text: "a\"bé", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"escaped key, last duplicate wins", `{"text":"x","te\u0078t":"y"}`, false,
			Options{Text: "y", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"empty language is the voice's", `{"text":"a","language":""}`, false,
			Options{Text: "a", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"speed bounds low", `{"text":"a","speed":0.25}`, false,
			Options{Text: "a", Format: codec.WAV, SampleRate: 24000, NumStep: 32, Speed: ptr(0.25)}},
		{"speed bounds high", `{"text":"a","speed":4}`, true,
			Options{Text: "a", Format: codec.F32LE, SampleRate: 24000, NumStep: 32, Speed: ptr(4.0)}},
		{"speed null", `{"text":"a","speed":null}`, false,
			Options{Text: "a", Format: codec.WAV, SampleRate: 24000, NumStep: 32}},
		{"telephony mulaw 8k", `{"text":"a","output_format":"mulaw","sample_rate":8000}`, false,
			Options{Text: "a", Format: codec.MuLaw, SampleRate: 8000, NumStep: 32}},
		{"telephony alaw 8k sse", `{"text":"a","output_format":"alaw","sample_rate":8000}`, true,
			Options{Text: "a", Format: codec.ALaw, SampleRate: 8000, NumStep: 32}},
	}
	for _, f := range []codec.Format{codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE, codec.MuLaw, codec.ALaw} {
		for _, stream := range []bool{false, true} {
			tests = append(tests, struct {
				name   string
				body   string
				stream bool
				want   Options
			}{"format " + string(f), `{"text":"a","output_format":"` + string(f) + `"}`, stream,
				Options{Text: "a", Format: f, SampleRate: 24000, NumStep: 32}})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			parse := ParseSpeak
			if tc.stream {
				parse = ParseStream
			}
			got, err := parse([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			g, w := got, tc.want
			if (g.Expressiveness == nil) != (w.Expressiveness == nil) ||
				g.Expressiveness != nil && *g.Expressiveness != *w.Expressiveness {
				t.Fatalf("expressiveness %v, want %v", g.Expressiveness, w.Expressiveness)
			}
			if (g.Speed == nil) != (w.Speed == nil) || g.Speed != nil && *g.Speed != *w.Speed {
				t.Fatalf("speed %v, want %v", g.Speed, w.Speed)
			}
			g.Expressiveness, w.Expressiveness = nil, nil
			g.Speed, w.Speed = nil, nil
			if g != w {
				t.Fatalf("got %+v\nwant %+v", g, w)
			}
		})
	}
}

// TestParseTextLimit: the limit is 10,000 code points, not bytes: Hindi in
// Devanagari is three bytes a point.
func TestParseTextLimit(t *testing.T) {
	for _, r := range []string{"a", "न", "😀"} {
		body := []byte(`{"text":"` + strings.Repeat(r, MaxTextChars) + `"}`)
		o, err := ParseSpeak(body)
		if err != nil || o.Chars() != MaxTextChars {
			t.Fatalf("%q x 10,000: %v (chars %d)", r, err, o.Chars())
		}
		body = []byte(`{"text":"` + strings.Repeat(r, MaxTextChars+1) + `"}`)
		if _, err := ParseStream(body); !control.IsCode(err, control.ETextTooLong) {
			t.Fatalf("%q x 10,001: %v", r, err)
		}
	}
	if n := control.CountChars("नमस्ते दुनिया"); n != 13 {
		t.Fatalf("CountChars(Hindi) = %d, want 13 code points", n)
	}
}

func ptr[T any](v T) *T { return &v }

func wellFormed(tag string) bool { _, ok := langtag.Canonical(tag); return ok }

// FuzzParseSpeak: the parser never panics, refuses only with 400 codes,
// refuses every body encoding/json refuses with invalid_json, and what it
// accepts keeps every rule of docs/api.md#speak.
func FuzzParseSpeak(f *testing.F) {
	for _, s := range []string{`{"text":"hi"}`, `{"text":"a","sample_rate":8000.0,"num_step":3,"expressiveness":0}`,
		`{"text":"\ud83d\ude00","language":"en-GB","output_format":"s16le"}`, `[]`, `{"a":{"b":[{}]},"text":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		o, err := ParseSpeak(body)
		if !json.Valid(body) {
			if !control.IsCode(err, control.EInvalidJSON) {
				t.Fatalf("invalid JSON answered %v", err)
			}
			return
		}
		if err != nil {
			switch control.ErrorCode(err) {
			case control.EInvalidJSON, control.ETextRequired, control.EInvalidRequest, control.ETextTooLong, control.EInvalidLanguage,
				control.EInvalidOutputFormat, control.EInvalidSampleRate, control.EInvalidNumStep, control.EInvalidExpressive,
				control.EInvalidSpeed:
			default:
				t.Fatalf("refused with a code that is not a field's: %v", err)
			}
			return
		}
		n := utf8.RuneCountInString(o.Text)
		if strings.TrimSpace(o.Text) == "" || n > MaxTextChars ||
			o.SampleRate < MinSampleRate || o.SampleRate > MaxSampleRate ||
			o.NumStep < 1 || o.NumStep > MaxNumStep ||
			o.Expressiveness != nil && (*o.Expressiveness < 0 || *o.Expressiveness > 1) ||
			o.Speed != nil && (*o.Speed < MinSpeed || *o.Speed > MaxSpeed) ||
			!(o.Format.IsPCM() || o.Format == codec.WAV) ||
			o.Language != "" && !wellFormed(o.Language) {
			t.Fatalf("accepted out-of-rule options %+v", o)
		}
		// encoding/json into a map (exact keys, last duplicate wins) reads
		// the same text.
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil {
			var std string
			if json.Unmarshal(m["text"], &std) != nil || std != o.Text {
				t.Fatalf("text %q, encoding/json reads %q", o.Text, std)
			}
		}
	})
}

// TestSpeedRule: speak and SSE read speed; rules without Speed (the
// WebSocket's, which has length_scale) ignore the key like an unknown one.
func TestSpeedRule(t *testing.T) {
	body := []byte(`{"text":"a","speed":9}`)
	if _, err := Parse(body, Rules{Format: codec.F32LE, Formats: []codec.Format{codec.F32LE}, MaxTextChars: 10}); err != nil {
		t.Fatalf("speed without the rule: %v", err)
	}
	o, err := ParseSpeak([]byte(`{"text":"a","speed":1.5}`))
	if err != nil || o.Speed == nil || *o.Speed != 1.5 {
		t.Fatalf("speak speed: %+v %v", o, err)
	}
}

// TestFormatMessages: the invalid_output_format message lists what is
// offered, telephony included.
func TestFormatMessages(t *testing.T) {
	for _, tc := range []struct {
		parse func([]byte) (Options, error)
		want  string
	}{
		{ParseSpeak, "wav, s16le, s24le, s32le, f32le, f64le, mulaw, alaw"},
		{ParseStream, "s16le, s24le, s32le, f32le, f64le, mulaw, alaw"},
	} {
		_, err := tc.parse([]byte(`{"text":"a","output_format":"aac"}`))
		if e := control.AsError(err); e.Code != control.EInvalidOutputFormat || !strings.HasSuffix(e.Message, tc.want) {
			t.Errorf("%v, want a message listing %s", err, tc.want)
		}
	}
}
