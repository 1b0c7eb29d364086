package synth

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/engine/reference"
)

// wordsOf renders text with eng and runs every chunk through a WordClock.
func wordsOf(t *testing.T, eng engine.Engine, lang, text string, profile []byte) ([]Word, []engine.WordEvent, float64) {
	t.Helper()
	clock := NewWordClock(eng.NativeRate(), text)
	var words []Word
	var events []engine.WordEvent
	samples := 0
	err := eng.Synthesize(context.Background(), engine.Request{Text: text, Language: lang, Profile: profile},
		func(c engine.Chunk) error {
			events = append(events, c.Words...)
			words = append(words, clock.Chunk(c)...)
			samples += len(c.Samples)
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return words, events, float64(samples) / float64(eng.NativeRate())
}

// checkWords holds for every engine: each word once, in order, slicing the
// text at its code points gives the word, ends never pass the next start
// nor the audio's end.
func checkWords(t *testing.T, text string, words []Word, total float64) {
	t.Helper()
	runes := []rune(text)
	for i, w := range words {
		if w.CharStart < 0 || w.CharEnd > len(runes) || string(runes[w.CharStart:w.CharEnd]) != w.Word {
			t.Fatalf("word %d %+v: text[%d:%d] is not the word", i, w, w.CharStart, w.CharEnd)
		}
		if len(engine.Words(w.Word)) != 1 {
			t.Fatalf("word %d %q is not one word", i, w.Word)
		}
		if w.EndS < w.StartS || w.EndS > total+1e-9 {
			t.Fatalf("word %d %+v: end outside [start, %v]", i, w, total)
		}
		if i > 0 {
			p := words[i-1]
			if w.CharStart < p.CharEnd || w.StartS < p.StartS || p.EndS > w.StartS+1e-9 {
				t.Fatalf("words %d and %d out of order or overlapping: %+v %+v", i-1, i, p, w)
			}
		}
	}
}

func TestWordClockReference(t *testing.T) {
	eng := reference.New(reference.Options{})
	for _, text := range []string{
		"Hello there, general Kenobi. Dr. Smith paid $5.",
		"नमस्ते दुनिया। आप कैसे हैं?",
	} {
		words, _, total := wordsOf(t, eng, "en", text, reference.MarshalProfile(220))
		checkWords(t, text, words, total)
		// The reference engine reports every word of the text, at known
		// positions: the clock keeps them exactly.
		want := engine.Words(text)
		if len(words) != len(want) {
			t.Fatalf("%q: %d words, want %d", text, len(words), len(want))
		}
		perChar := reference.PerCharacter.Seconds()
		for i, w := range words {
			spoken := strings.Join(strings.Fields(text[:want[i].Start]), "")
			start := float64(utf8.RuneCountInString(spoken)) * perChar
			if w.Word != want[i].Text || abs(w.StartS-start) > 1.0/reference.Rate {
				t.Fatalf("%q word %d: %+v, want %q at %v s", text, i, w, want[i].Text, start)
			}
		}
	}
}

func TestWordClockEspeak(t *testing.T) {
	eng, err := espeak.New() // the process's one instance, shared with other tests
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ lang, text string }{
		{"en", "Dr. Smith paid $5 for 3 apples, didn't he?"},
		{"hi", "नमस्ते दुनिया, आप कैसे हैं?"},
		// espeak-ng runs "it is" together: no event of their own.
		{"en", "Each word lights up as it is spoken. It is."},
	} {
		words, events, total := wordsOf(t, eng, tc.lang, tc.text, nil)
		checkWords(t, tc.text, words, total)
		if len(words) != len(engine.Words(tc.text)) {
			t.Fatalf("%q: %d words, want every one of %d: %+v", tc.text, len(words), len(engine.Words(tc.text)), words)
		}
		// Each word starts where the engine's first event in it said.
		runes := []rune(tc.text)
		j := 0
		for _, w := range words {
			lo := len(string(runes[:w.CharStart]))
			hi := lo + len(w.Word)
			for ; j < len(events); j++ {
				ev := events[j]
				if ev.TextOffset < hi && ev.TextOffset+max(ev.TextLength, 1) > lo {
					break
				}
			}
			if j == len(events) {
				j = 0 // a word the engine ran into another: placed between its neighbours
				continue
			}
			if d := abs(w.StartS - float64(events[j].Sample)/float64(eng.NativeRate())); d > 0.010 {
				t.Fatalf("%q: %q starts %v s from its event", tc.text, w.Word, d)
			}
			j++
		}
	}
}

func TestWordClockReset(t *testing.T) {
	// A realtime context: two sentences, each its own request, on one clock.
	eng := reference.New(reference.Options{})
	joined := "First one. Second one here."
	clock := NewWordClock(eng.NativeRate(), "")
	var words []Word
	base := 0.0
	for _, s := range []struct {
		text string
		at   int
	}{{"First one.", 0}, {"Second one here.", 11}} {
		clock.Reset(s.text, s.at, base)
		samples := 0
		eng.Synthesize(context.Background(), engine.Request{Text: s.text, Profile: reference.MarshalProfile(220)}, func(c engine.Chunk) error {
			words = append(words, clock.Chunk(c)...)
			samples += len(c.Samples)
			return nil
		})
		base += float64(samples) / float64(eng.NativeRate())
	}
	checkWords(t, joined, words, base)
	if len(words) != 5 || words[2].Word != "Second" || words[2].CharStart != 11 || words[2].StartS < 0.5 {
		t.Fatalf("words %+v", words)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
