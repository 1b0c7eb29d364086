package native

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/langtag"
	"voicesvc/synth"
	"voicesvc/web"
)

// Seeds live in testdata/fuzz/<name>/; `go test` runs them, `go test
// -fuzz=FuzzVoiceCreateBody ./dialect/native` explores further.

// parseVoiceCreate and parseVoiceUpdate are a body as the handlers take
// it: decoded here, validated by the core.
func parseVoiceCreate(body []byte) (*synth.VoiceChange, error) {
	f, err := decodeVoice(body)
	if err != nil {
		return nil, err
	}
	return synth.VoiceCreate(f)
}

func parseVoiceUpdate(body []byte) (*synth.VoiceChange, error) {
	f, err := decodeVoice(body)
	if err != nil {
		return nil, err
	}
	return synth.VoiceUpdate(f)
}

// checkVoiceInput is what any accepted body must satisfy.
func checkVoiceInput(t *testing.T, body []byte, in *synth.VoiceChange, err error) {
	if err != nil {
		e, ok := err.(*control.Error)
		if !ok {
			t.Fatalf("error %T %v is not a *control.Error", err, err)
		}
		if s := web.StatusOf(e.Code); s != 400 && s != 413 {
			t.Fatalf("status %d (%s) for a body error", s, e.Code)
		}
		return
	}
	if len(body) > 0 && !json.Valid(body) && len(trimSpace(body)) > 0 {
		t.Fatalf("invalid JSON accepted: %q", body)
	}
	if in.Name != nil && (*in.Name == "" || utf8.RuneCountInString(*in.Name) > 100) {
		t.Fatalf("bad name accepted: %q", *in.Name)
	}
	if in.PrimaryLanguage != nil {
		if again, ok := langtag.Canonical(*in.PrimaryLanguage); !ok || again != *in.PrimaryLanguage {
			t.Fatalf("language %q not canonical", *in.PrimaryLanguage)
		}
	}
	if in.Settings != nil && *in.Settings != nil {
		st := *in.Settings
		for _, c := range []struct {
			v      *float64
			lo, hi float64
		}{{st.Stability, 0, 1}, {st.Similarity, 0, 1}, {st.Style, 0, 1}, {st.Speed, 0.25, 4}, {st.Pitch, -12, 12}, {st.Volume, 0, 2}} {
			if c.v != nil && (*c.v < c.lo || *c.v > c.hi) {
				t.Fatalf("setting %v out of [%v, %v] accepted", *c.v, c.lo, c.hi)
			}
		}
		// What is accepted can be written back as JSON.
		if b := appendSettings(nil, st); !json.Valid(b) {
			t.Fatalf("settings render as invalid JSON: %s", b)
		}
	}
	if in.Labels != nil {
		v := &control.Voice{Labels: *in.Labels}
		if b := appendVoice(nil, v, []string{"alloy"}); !json.Valid(b) {
			t.Fatalf("voice renders as invalid JSON: %s", b)
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

func FuzzVoiceCreateBody(f *testing.F) {
	f.Add([]byte(`{"name":"a","consent":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := parseVoiceCreate(body)
		checkVoiceInput(t, body, in, err)
		if err == nil && in.Name == nil {
			t.Fatalf("create accepted without a name: %q", body)
		}
	})
}

func FuzzVoiceUpdateBody(f *testing.F) {
	f.Add([]byte(`{"settings":{"speed":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := parseVoiceUpdate(body)
		checkVoiceInput(t, body, in, err)
	})
}
