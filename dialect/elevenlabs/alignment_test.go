package elevenlabs

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/engine"
	"voicesvc/synth"
)

// words are the words of text (engine.Words, as a WordClock finds them)
// spoken one after another, each len/10 s long with 50 ms between.
func words(text string) []synth.Word {
	var out []synth.Word
	t := 0.1
	for _, sp := range engine.Words(text) {
		start := utf8.RuneCountInString(text[:sp.Start])
		n := utf8.RuneCountInString(sp.Text)
		out = append(out, synth.Word{Word: sp.Text, StartS: t, EndS: t + float64(n)/10, CharStart: start, CharEnd: start + n})
		t += float64(n)/10 + 0.05
	}
	return out
}

// TestAligner: the characters join to the text, a word's characters share
// its span, the gaps theirs, and the times never go back, taken in any
// pieces.
func TestAligner(t *testing.T) {
	for _, text := range []string{
		"Hello there, world!",
		"  Ça va? Très bien — merci.  ",
		"one",
		"¿Qué? 😀 emoji, and \"quotes\".",
		"...",
	} {
		ws := words(text)
		total := 0.2
		if len(ws) > 0 {
			total = ws[len(ws)-1].EndS + 0.3
		}
		a := newAligner(text)
		var got []charTime
		for i, w := range ws {
			a.word(w)
			if i%2 == 0 { // taken in uneven pieces, as lines are
				got = append(got, a.take()...)
			}
		}
		a.finish(total)
		got = append(got, a.take()...)

		var sb strings.Builder
		last := 0.0
		for i, c := range got {
			sb.WriteRune(c.r)
			if c.start < last || c.end < c.start || c.end > total+1e-9 {
				t.Fatalf("%q: character %d %q at %.3f-%.3f after %.3f", text, i, c.r, c.start, c.end, last)
			}
			last = c.start
		}
		if sb.String() != text {
			t.Fatalf("joined %q, want %q", sb.String(), text)
		}
		for _, w := range ws {
			first, lastc := got[w.CharStart], got[w.CharEnd-1]
			if first.start != w.StartS || lastc.end < w.EndS-1e-9 || lastc.end > w.EndS+1e-9 {
				t.Errorf("%q: word %q spans %.3f-%.3f, its characters %.3f-%.3f", text, w.Word, w.StartS, w.EndS, first.start, lastc.end)
			}
		}
	}
}

// TestAppendTimestamped: the HTTP object parses, with the same alignment
// twice and the audio's base64.
func TestAppendTimestamped(t *testing.T) {
	a := newAligner(`a "b"`)
	a.finish(1)
	b := appendTimestamped(nil, []byte{1, 2, 3}, a.take())
	if b[len(b)-1] != '\n' {
		t.Fatalf("no newline: %q", b)
	}
	var v struct {
		Audio      string `json:"audio_base64"`
		Alignment  map[string][]any
		Normalized map[string][]any `json:"normalized_alignment"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Audio != "AQID" {
		t.Fatalf("%s: %v", b, err)
	}
	if len(v.Alignment["characters"]) != 5 || len(v.Normalized["character_end_times_seconds"]) != 5 ||
		v.Alignment["characters"][1] != " " || v.Alignment["characters"][2] != `"` {
		t.Errorf("%s", b)
	}
	if b := appendTimestamped(nil, nil, nil); !json.Valid(b) {
		t.Errorf("empty: %s", b)
	}
}

// FuzzAligner: for any text and any word spans a clock could report (in
// order, within the text), the characters join to the text and the times
// never go back.
func FuzzAligner(f *testing.F) {
	f.Add("Hello there, world!", []byte{0, 5, 6, 11})
	f.Add("😀 a b", []byte{2, 3, 3, 200})
	f.Fuzz(func(t *testing.T, text string, spans []byte) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		n := utf8.RuneCountInString(text)
		a := newAligner(text)
		var got []charTime
		at, clock := 0, 0.0
		for i := 0; i+1 < len(spans); i += 2 {
			s := at + int(spans[i])%4
			e := s + 1 + int(spans[i+1])%6
			if e > n {
				break
			}
			clock += float64(spans[i]) / 100
			end := clock + float64(spans[i+1])/100
			a.word(synth.Word{StartS: clock, EndS: end, CharStart: s, CharEnd: e})
			clock, at = end, e
			got = append(got, a.take()...)
		}
		a.finish(clock + 0.5)
		got = append(got, a.take()...)
		var sb strings.Builder
		last := 0.0
		for _, c := range got {
			sb.WriteRune(c.r)
			if c.start < last-1e-9 || c.end < c.start-1e-9 {
				t.Fatalf("times go back: %+v after %.3f", c, last)
			}
			last = c.start
		}
		if sb.String() != text {
			t.Fatalf("joined %q, want %q", sb.String(), text)
		}
		if !json.Valid(appendAlignmentSeconds(nil, got)) {
			t.Fatalf("invalid JSON")
		}
	})
}
