package sessions

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/engine/reference"
)

// context's words as the client sees them: every word_timestamps frame's
// words in order, each checked against the audio that had arrived when it
// came (a word comes before the audio that holds its start).
type heardContext struct {
	words     []wordTS
	sentences []float64 // sentence_done durations
	audio     float64   // audio_chunk durations received
	started   event
	cancelled *event
	frames    int // word_timestamps frames
}

func readContext(t *testing.T, c *client, id string) heardContext {
	t.Helper()
	var h heardContext
	for {
		ev := c.mustNext(t)
		if ev.ContextID != id {
			continue
		}
		switch ev.Type {
		case "task_started":
			h.started = ev
		case "word_timestamps":
			h.frames++
			for _, w := range ev.Words {
				// (The client sums durations rounded to microseconds.)
				if w.StartS+1e-4 < h.audio {
					t.Fatalf("word %+v came after %.6f s of audio: its start was already sent", w, h.audio)
				}
				h.words = append(h.words, w)
			}
		case "audio_chunk":
			h.audio += ev.AudioDuration
		case "sentence_done":
			h.sentences = append(h.sentences, ev.AudioDuration)
		case "task_done", "task_failed":
			return h
		case "task_cancelled":
			h.cancelled = &ev
			return h
		case "error":
			t.Fatalf("error frame %+v", ev)
		}
	}
}

// checkWordsOf: each word once, in order, slicing the joined text at its
// code points gives it, ends within [start, next start] and the audio.
func checkWordsOf(t *testing.T, joined string, words []wordTS, total float64) {
	t.Helper()
	runes := []rune(joined)
	for i, w := range words {
		if w.CharStart < 0 || w.CharEnd > len(runes) || string(runes[w.CharStart:w.CharEnd]) != w.Word {
			t.Fatalf("word %d %+v does not slice %q", i, w, joined)
		}
		if w.EndS < w.StartS || w.EndS > total+1e-6 {
			t.Fatalf("word %d %+v ends outside [start, %v]", i, w, total)
		}
		if i > 0 && (w.CharStart < words[i-1].CharEnd || words[i-1].EndS > w.StartS+1e-6) {
			t.Fatalf("words %d, %d out of order: %+v %+v", i-1, i, words[i-1], w)
		}
	}
}

// TestWordTimestampsReference: with the reference engine every word of
// the context's text comes once, at exactly the time the engine places it,
// in every format and rate, for a context built from three frames and for
// Devanagari.
func TestWordTimestampsReference(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(reference.New()))
	perChar := reference.PerCharacter.Seconds()
	for _, tc := range []struct {
		name, format string
		rate         int
		parts        []string
	}{
		{"three frames pcm 24k", "s16le", 24000, []string{"Hello there. This", " is a", " test of words, Dr. Smith paid $5."}},
		{"f32le 8k", "f32le", 8000, []string{"One two three. Four five."}},
		{"s16le 48k", "s16le", 48000, []string{"One two three. Four five."}},
		{"opus", "opus", 48000, []string{"One two three. Four five six seven."}},
		{"mulaw 8k", "mulaw", 8000, []string{"Telephone audio, word by word."}},
		{"hindi", "f32le", 24000, []string{"नमस्ते दुनिया। आप कैसे", " हैं?"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ts.dial(t)
			c.mustSend(t, start("c", tc.parts[0], len(tc.parts) == 1, "timestamps", true,
				"output_format", tc.format, "sample_rate", tc.rate, "language", map[bool]string{true: "hi", false: "en"}[tc.name == "hindi"]))
			for i, p := range tc.parts[1:] {
				c.mustSend(t, cont("c", p, i == len(tc.parts)-2))
			}
			h := readContext(t, c, "c")
			if h.started.Timestamps == nil || !*h.started.Timestamps {
				t.Fatalf("task_started.timestamps = %v", h.started.Timestamps)
			}
			joined := strings.Join(tc.parts, "")
			checkWordsOf(t, joined, h.words, h.audio)
			want := engine.Words(joined)
			if len(h.words) != len(want) {
				t.Fatalf("%d words, want %d: %+v", len(h.words), len(want), h.words)
			}
			// The reference engine's clock: 60 ms per non-space character
			// from its sentence's start; sentences follow each other.
			sents := engine.Sentences(joined)
			base, si := 0.0, 0
			for i, w := range h.words {
				for si < len(sents)-1 && want[i].Start >= sents[si+1].Start {
					base += h.sentences[si]
					si++
				}
				spoken := strings.Join(strings.Fields(joined[sents[si].Start:want[i].Start]), "")
				at := base + float64(utf8.RuneCountInString(spoken))*perChar
				tol := 2.0 / float64(tc.rate) // the output clock rounds to its samples
				if tc.format == "opus" {
					tol = 0.021 // 20 ms packets
				}
				if w.Word != want[i].Text || abs(w.StartS-at) > tol {
					t.Fatalf("word %d %+v, want %q at %.6f s", i, w, want[i].Text, at)
				}
			}
		})
	}
	t.Run("off", func(t *testing.T) {
		c := ts.dial(t)
		c.mustSend(t, start("c", "No timestamps here.", true))
		h := readContext(t, c, "c")
		if h.frames != 0 || h.started.Timestamps == nil || *h.started.Timestamps {
			t.Fatalf("%d word frames, task_started.timestamps %v", h.frames, h.started.Timestamps)
		}
	})
}

// TestWordTimestampsEspeak: each word starts within 10 ms of the sample
// position of espeak-ng's own word event for it.
func TestWordTimestampsEspeak(t *testing.T) {
	e, err := espeak.New()
	if err != nil {
		t.Fatal(err)
	}
	profile := e.Catalog()[0].Profile
	deps := refDeps(e)
	deps.Voice = func(context.Context, string) (*control.Voice, error) {
		return &control.Voice{ID: voiceReady, Status: control.VoiceReady, Profile: profile}, nil
	}
	ts := startServer(t, Config{}, deps)
	text := "Dr. Smith paid $5 for 3 apples. Then he left!"
	c := ts.dial(t)
	c.mustSend(t, start("c", text, true, "timestamps", true, "sample_rate", 16000))
	h := readContext(t, c, "c")
	checkWordsOf(t, text, h.words, h.audio)
	if len(h.words) < 9 {
		t.Fatalf("only %d words: %+v", len(h.words), h.words)
	}
	// The engine's own events, sentence by sentence as the context renders.
	var events []float64 // seconds, on the context's clock
	base := 0.0
	for i, s := range engine.Sentences(text) {
		n := 0
		err := e.Synthesize(context.Background(), engine.Request{Text: s.Text, Language: "en", Profile: profile}, func(ch engine.Chunk) error {
			for _, w := range ch.Words {
				if len(engine.Words(s.Text[w.TextOffset:w.TextOffset+w.TextLength])) > 0 {
					events = append(events, base+float64(w.Sample)/float64(e.NativeRate()))
				}
			}
			n += len(ch.Samples)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		base += h.sentences[i]
	}
	j := 0
	for _, w := range h.words {
		for j < len(events) && events[j] < w.StartS-0.010 {
			j++
		}
		if j == len(events) || abs(events[j]-w.StartS) > 0.010 {
			t.Fatalf("%q at %.4f s: no engine word event within 10 ms (events %v)", w.Word, w.StartS, events)
		}
	}
}

// TestCancelReceipt: task_cancelled says how much audio went out before it
// and the text whose words were wholly in that audio, cancelling in the
// middle of a sentence and between sentences.
func TestCancelReceipt(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(reference.New(reference.Options{RTF: 1})))
	text := "First sentence is here. Second one follows it now. Third is never heard at all."
	for _, after := range []int{20, 70} { // audio chunks (20 ms) received before the cancel
		c := ts.dial(t)
		c.mustSend(t, start("c", text, true, "timestamps", true))
		type heard struct {
			wordTS
			sentence int
		}
		var words []heard
		var sentenceEnds []float64 // cumulative, per sentence_done
		audio, chunks := 0.0, 0
		var cancelled *event
		for cancelled == nil {
			ev := c.mustNext(t)
			switch ev.Type {
			case "word_timestamps":
				for _, w := range ev.Words {
					words = append(words, heard{w, ev.SentenceIndex})
				}
			case "audio_chunk":
				audio += ev.AudioDuration
				if chunks++; chunks == after {
					c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": "c"})
				}
			case "sentence_done":
				sentenceEnds = append(sentenceEnds, audio)
			case "task_cancelled":
				cancelled = &ev
			case "task_done":
				t.Fatal("finished before the cancel")
			}
		}
		if abs(cancelled.AudioSentS-audio) > 1e-6 {
			t.Fatalf("audio_sent_s %.6f, the client got %.6f s", cancelled.AudioSentS, audio)
		}
		// A word's audio runs to the next word of its sentence, or to the
		// sentence's end; every word whose whole audio arrived is within
		// spoken_until, and the first that did not is not.
		until := 0
		for i, w := range words {
			end := 1e9
			switch {
			case i+1 < len(words) && words[i+1].sentence == w.sentence:
				end = words[i+1].StartS
			case w.sentence < len(sentenceEnds):
				end = sentenceEnds[w.sentence]
			}
			if end > audio+1e-6 {
				break
			}
			until = w.CharEnd
		}
		if cancelled.SpokenUntil != until || until == 0 || until >= len(text) {
			t.Fatalf("after %d chunks (%.3f s): spoken_until %d, want %d (%q)", after, audio, cancelled.SpokenUntil, until, text[:until])
		}
		t.Logf("after %.2f s of audio: spoken_until %d (%q)", audio, until, text[:until])
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
