package synth

import (
	"net/url"
	"testing"

	"voicesvc/codec"
	"voicesvc/control"
)

// dgQuery reads a query string as the dialect does: absent keys nil.
func dgQuery(t testing.TB, raw string) DeepgramQuery {
	t.Helper()
	v, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	get := func(k string) []byte {
		if !v.Has(k) {
			return nil
		}
		return append([]byte{}, v.Get(k)...)
	}
	return DeepgramQuery{Model: get("model"), Encoding: get("encoding"), Container: get("container"),
		SampleRate: get("sample_rate"), BitRate: get("bit_rate"), Speed: get("speed"), Callback: get("callback")}
}

// TestParseDeepgramFormats: every encoding and container the vendor
// documents maps onto a voicesvc format at the vendor's default rate, or
// the rate asked.
func TestParseDeepgramFormats(t *testing.T) {
	if !codec.MP3Available {
		t.Skip("built without MP3")
	}
	tests := []struct {
		query  string
		format codec.Format
		rate   int
		wav    bool
	}{
		{"", codec.WAV, 24000, false},
		{"encoding=linear16", codec.WAV, 24000, false},
		{"encoding=linear16&container=wav&sample_rate=8000", codec.WAV, 8000, false},
		{"encoding=linear16&container=none&sample_rate=16000", codec.S16LE, 16000, false},
		{"encoding=linear16&container=none&sample_rate=48000", codec.S16LE, 48000, false},
		{"encoding=mulaw", codec.MuLaw, 8000, true},
		{"encoding=mulaw&container=none&sample_rate=16000", codec.MuLaw, 16000, false},
		{"encoding=alaw&container=wav", codec.ALaw, 8000, true},
		{"encoding=mp3", codec.MP3, 22050, false},
		{"encoding=mp3&bit_rate=32000&container=none", codec.MP3, 22050, false},
		{"encoding=mp3&sample_rate=24000", codec.MP3, 24000, false},
		{"encoding=opus", codec.OggOpus, 48000, false},
		{"encoding=opus&container=ogg&sample_rate=16000&bit_rate=12000", codec.OggOpus, 48000, false},
		{"encoding=flac&sample_rate=16000", codec.FLAC, 16000, false},
		{"model=aura-2-thalia-en&speed=1.2&mip_opt_out=true&tag=x", codec.WAV, 24000, false},
	}
	for _, tt := range tests {
		q := dgQuery(t, tt.query)
		in, err := ParseDeepgramSpeak(&q, []byte(`{"text":"Hello."}`))
		if err != nil {
			t.Errorf("%s: %v", tt.query, err)
			continue
		}
		o := in.Options
		if o.Format != tt.format || o.SampleRate != tt.rate || in.G711WAV != tt.wav || o.Text != "Hello." {
			t.Errorf("%s: %s %d Hz wav %v %q; want %s %d Hz wav %v", tt.query, o.Format, o.SampleRate, in.G711WAV,
				o.Text, tt.format, tt.rate, tt.wav)
		}
	}
	q := dgQuery(t, "model=aura-2-thalia-en&speed=1.2")
	in, _ := ParseDeepgramSpeak(&q, []byte(`{"text":"Hi"}`))
	if in.Model != "aura-2-thalia-en" || in.Options.Speed == nil || *in.Options.Speed != 1.2 {
		t.Errorf("model %q speed %v", in.Model, in.Options.Speed)
	}
	q = dgQuery(t, "")
	if in, _ = ParseDeepgramSpeak(&q, []byte(`{"text":"Hi"}`)); in.Model != DeepgramDefaultModel {
		t.Errorf("default model %q", in.Model)
	}
}

// TestParseDeepgramRefusals: each refusal has its code and names the
// field at fault as the vendor spells it.
func TestParseDeepgramRefusals(t *testing.T) {
	tests := []struct {
		query, body string
		code, param string
	}{
		{"", `{"text":`, control.EInvalidJSON, ""},
		{"", `[]`, control.EInvalidJSON, ""},
		{"", `{}`, control.ETextRequired, "text"},
		{"", `{"text":"  "}`, control.ETextRequired, "text"},
		{"", `{"text":5}`, control.EInvalidRequest, "text"},
		{"callback=https://example.com/x", `{"text":"hi"}`, control.EInvalidRequest, "callback"},
		{"model=", `{"text":"hi"}`, control.EInvalidRequest, "model"},
		{"encoding=aac", `{"text":"hi"}`, control.EUnsupportedFormat, "encoding"},
		{"encoding=LINEAR16", `{"text":"hi"}`, control.EInvalidOutputFormat, "encoding"},
		{"encoding=", `{"text":"hi"}`, control.EInvalidOutputFormat, "encoding"},
		{"encoding=linear16&container=ogg", `{"text":"hi"}`, control.EInvalidRequest, "container"},
		{"encoding=opus&container=none", `{"text":"hi"}`, control.EInvalidRequest, "container"},
		{"encoding=flac&container=wav", `{"text":"hi"}`, control.EInvalidRequest, "container"},
		{"sample_rate=7999", `{"text":"hi"}`, control.EInvalidSampleRate, "sample_rate"},
		{"sample_rate=abc", `{"text":"hi"}`, control.EInvalidSampleRate, "sample_rate"},
		{"sample_rate=", `{"text":"hi"}`, control.EInvalidSampleRate, "sample_rate"},
		{"sample_rate=24000.5", `{"text":"hi"}`, control.EInvalidSampleRate, "sample_rate"},
		{"bit_rate=0", `{"text":"hi"}`, control.EInvalidRequest, "bit_rate"},
		{"bit_rate=fast", `{"text":"hi"}`, control.EInvalidRequest, "bit_rate"},
		{"speed=5", `{"text":"hi"}`, control.EInvalidSpeed, "speed"},
		{"speed=quick", `{"text":"hi"}`, control.EInvalidSpeed, "speed"},
	}
	for _, tt := range tests {
		q := dgQuery(t, tt.query)
		_, err := ParseDeepgramSpeak(&q, []byte(tt.body))
		e := control.AsError(err)
		if err == nil || e.Code != tt.code || e.Param != tt.param {
			t.Errorf("%s %s: %v (param %q); want %s naming %q", tt.query, tt.body, err, e.Param, tt.code, tt.param)
		}
	}
}

// TestParseDeepgramSocket: the socket streams the raw encodings only,
// with no container but "none"; the text comes later.
func TestParseDeepgramSocket(t *testing.T) {
	ok := []struct {
		query  string
		format codec.Format
		rate   int
	}{
		{"", codec.S16LE, 24000},
		{"model=aura-2-thalia-en&encoding=linear16&sample_rate=16000&mip_opt_out=false", codec.S16LE, 16000},
		{"encoding=mulaw", codec.MuLaw, 8000},
		{"encoding=alaw&sample_rate=16000&container=none", codec.ALaw, 16000},
	}
	for _, tt := range ok {
		q := dgQuery(t, tt.query)
		in, err := ParseDeepgramSocket(&q)
		if err != nil || in.Options.Format != tt.format || in.Options.SampleRate != tt.rate || in.G711WAV {
			t.Errorf("%s: %+v %v", tt.query, in.Options, err)
		}
	}
	bad := []struct{ query, code string }{
		{"encoding=mp3", control.EInvalidOutputFormat},
		{"encoding=opus", control.EInvalidOutputFormat},
		{"encoding=aac", control.EInvalidOutputFormat},
		{"container=wav", control.EInvalidRequest},
		{"sample_rate=96000", control.EInvalidSampleRate},
		{"speed=0.1", control.EInvalidSpeed},
	}
	for _, tt := range bad {
		q := dgQuery(t, tt.query)
		if _, err := ParseDeepgramSocket(&q); control.AsError(err).Code != tt.code {
			t.Errorf("%s: %v; want %s", tt.query, err, tt.code)
		}
	}
}

// FuzzParseDeepgram: any query and body parse to options the pipeline
// accepts, or to a 400 refusal; never a panic.
func FuzzParseDeepgram(f *testing.F) {
	f.Add("encoding=mulaw&sample_rate=8000", `{"text":"hi"}`)
	f.Add("encoding=mp3&bit_rate=48000", `{"text":"Hello there."}`)
	f.Add("encoding=opus&container=ogg", `{"text":"a","text":"b"}`)
	f.Add("sample_rate=1e3&speed=-0", `{"te\u0078t":"x"}`)
	f.Add("model=%00&callback", `null`)
	f.Fuzz(func(t *testing.T, query, body string) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		get := func(k string) []byte {
			if !v.Has(k) {
				return nil
			}
			return []byte(v.Get(k))
		}
		q := DeepgramQuery{Model: get("model"), Encoding: get("encoding"), Container: get("container"),
			SampleRate: get("sample_rate"), BitRate: get("bit_rate"), Speed: get("speed"), Callback: get("callback")}
		for _, socket := range []bool{false, true} {
			var in DeepgramSpeech
			if socket {
				in, err = ParseDeepgramSocket(&q)
			} else {
				in, err = ParseDeepgramSpeak(&q, []byte(body))
			}
			if err != nil {
				if e := control.AsError(err); e.Code == control.EInternal {
					t.Fatalf("internal refusal: %v", err)
				}
				continue
			}
			o := in.Options
			if _, ok := codec.LookupFormat(o.Format); !ok || o.SampleRate < MinSampleRate || o.SampleRate > MaxSampleRate {
				t.Fatalf("accepted %s at %d Hz", o.Format, o.SampleRate)
			}
			if socket && !o.Format.IsPCM() || in.Model == "" {
				t.Fatalf("socket %v: %s, model %q", socket, o.Format, in.Model)
			}
		}
	})
}
