package reference

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"voicesvc/engine"
)

func collect(t *testing.T, e *Engine, req engine.Request) []engine.Chunk {
	t.Helper()
	var out []engine.Chunk
	err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSynthesize(t *testing.T) {
	tests := []struct {
		name      string
		req       engine.Request
		samples   int
		sentences int
		words     int
	}{
		{"one word", engine.Request{Text: "Hello.", Language: "en"}, 6 * 1440, 1, 1},
		{"two sentences", engine.Request{Text: "Hi there. Bye!"}, 12 * 1440, 2, 3},
		{"speed 2", engine.Request{Text: "Hello.", Params: engine.Params{Speed: 2}}, 6 * 720, 1, 1},
		{"hindi", engine.Request{Text: "नमस्ते दुनिया।", Language: "hi"}, 13 * 1440, 1, 2},
	}
	e := New()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := collect(t, e, tc.req)
			n, words, lastSentence := 0, 0, -1
			for _, c := range chunks {
				n += len(c.Samples)
				words += len(c.Words)
				if c.Last {
					lastSentence = c.Sentence
				}
			}
			if n != tc.samples || words != tc.words || lastSentence != tc.sentences-1 {
				t.Errorf("samples %d words %d last sentence %d; want %d %d %d",
					n, words, lastSentence, tc.samples, tc.words, tc.sentences-1)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	e := New()
	req := engine.Request{Text: "Same text twice. Same audio.", Profile: MarshalProfile(330)}
	a, b := collect(t, e, req), collect(t, e, req)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d chunks", len(a), len(b))
	}
	for i := range a {
		for j := range a[i].Samples {
			if a[i].Samples[j] != b[i].Samples[j] {
				t.Fatalf("chunk %d sample %d differs", i, j)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  engine.Request
	}{
		{"empty", engine.Request{Text: "  \n "}},
		{"language", engine.Request{Text: "Hola.", Language: "es"}},
		{"profile", engine.Request{Text: "Hi.", Profile: []byte("nope")}},
	}
	for _, tc := range tests {
		err := New().Synthesize(context.Background(), tc.req, func(engine.Chunk) error { return nil })
		if !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", tc.name, err)
		}
	}
}

func TestPacingAndCancel(t *testing.T) {
	e := New(Options{RTF: 1})
	ctx, cancel := context.WithCancel(context.Background())
	chunks := 0
	err := e.Synthesize(ctx, engine.Request{Text: "A long sentence that would take seconds."}, func(engine.Chunk) error {
		chunks++
		if chunks == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || chunks != 2 {
		t.Fatalf("err %v after %d chunks", err, chunks)
	}
	start := time.Now()
	collect(t, New(Options{RTF: 0}), engine.Request{Text: "Unpaced text renders at once."})
	if time.Since(start) > time.Second {
		t.Log("unpaced rendering was slow (shared machine?)")
	}
}

func BenchmarkSynthesize(b *testing.B) {
	e := New()
	req := engine.Request{Text: "A sentence of about forty characters here."}
	b.ReportAllocs()
	samples := 0
	for b.Loop() {
		samples = 0
		if err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
			samples += len(c.Samples)
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(samples)/Rate*float64(b.N)/b.Elapsed().Seconds(), "x-real-time")
}

// TestToneDefinition: the samples are amp·sin(2π·f·t), t from each
// sentence's start, for the voices' tones and a pitch-shifted one.
func TestToneDefinition(t *testing.T) {
	for _, tc := range []struct {
		freq  float64
		pitch float64
	}{{220, 0}, {330, 0}, {275, 0}, {220, 3.5}} {
		chunks := collect(t, New(), engine.Request{Text: "A sentence long enough. And one more.",
			Profile: MarshalProfile(tc.freq), Params: engine.Params{Pitch: tc.pitch}})
		f := tc.freq * math.Pow(2, tc.pitch/12)
		sentence, n := -1, 0
		for ci, c := range chunks {
			if c.Sentence != sentence {
				sentence, n = c.Sentence, 0
			}
			for i, got := range c.Samples {
				want := Amplitude * math.Sin(2*math.Pi*f*float64(n)/Rate)
				if math.Abs(float64(got)-want) > 1e-6 {
					t.Fatalf("%g Hz chunk %d sample %d: %g, want %g", f, ci, i, got, want)
				}
				n++
			}
		}
	}
}

// TestPacingStartTime: paced at real time, the first chunk leaves at once
// and chunk k no earlier than k chunk durations after the start.
func TestPacingStartTime(t *testing.T) {
	e := New(Options{RTF: 1})
	start := time.Now()
	var at []time.Duration
	err := e.Synthesize(context.Background(), engine.Request{Text: "Hi."}, func(engine.Chunk) error {
		at = append(at, time.Since(start))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(at) != 9 { // "Hi." is 3 characters × 60 ms, in 20 ms chunks
		t.Fatalf("%d chunks", len(at))
	}
	if at[0] > 10*time.Millisecond {
		t.Errorf("first chunk after %v, want at once", at[0])
	}
	for k, d := range at {
		if d < time.Duration(k)*DefaultChunk {
			t.Errorf("chunk %d at %v, before its start time %v", k, d, time.Duration(k)*DefaultChunk)
		}
	}
	if last := at[len(at)-1]; last > 8*DefaultChunk+50*time.Millisecond {
		t.Logf("last chunk late at %v (shared machine?)", last)
	}
}

// TestToneChunking: a sentence's samples do not depend on where chunks cut
// it, nor on whether they came from the cache.
func TestToneChunking(t *testing.T) {
	const n = 5000
	whole := make([]float32, n)
	tone(whole, 0.3, 330, 0)
	var cache toneCache
	for _, chunk := range []int{1, 3, 4, 480, 1000, 1024, 1500} {
		for _, src := range []string{"computed", "cached"} {
			for off := 0; off < n; off += chunk {
				got := make([]float32, min(chunk, n-off))
				if src == "cached" {
					cache.fill(got, 0.3, 330, off)
				} else {
					tone(got, 0.3, 330, off)
				}
				for i, v := range got {
					if v != whole[off+i] {
						t.Fatalf("%s chunk %d: sample %d = %v, whole sentence has %v", src, chunk, off+i, v, whole[off+i])
					}
				}
			}
		}
	}
}

// TestSpeedExact: speed is an exact multiplier across the range (the API's
// 0.25-4 and the WebSocket's length_scale 0.2-5): on a text of more than
// 5 s at speed 1, the audio lasts 1/speed of it (within 5%) and every word
// starts at its start at speed 1 over speed (within 10 ms), coming with
// the chunk that holds its start.
func TestSpeedExact(t *testing.T) {
	const text = "The quick brown fox jumps over the lazy dog, and then it rests in the sun. " +
		"Later that evening, the farmer counted his chickens twice."
	e := New()
	render := func(speed float64) (int, []engine.WordEvent) {
		n := 0
		var words []engine.WordEvent
		for _, c := range collect(t, e, engine.Request{Text: text, Params: engine.Params{Speed: speed}}) {
			for _, w := range c.Words {
				if w.Sample < n || w.Sample > n+len(c.Samples) || w.Sample == n+len(c.Samples) && !c.Last {
					t.Errorf("speed %g: word at %d came with the chunk [%d, %d)", speed, w.Sample, n, n+len(c.Samples))
				}
			}
			n += len(c.Samples)
			words = append(words, c.Words...)
		}
		return n, words
	}
	n1, words1 := render(1)
	if d := float64(n1) / Rate; d < 5 {
		t.Fatalf("speed 1 lasts %.2f s; the test needs at least 5", d)
	}
	for _, speed := range []float64{0.2, 0.25, 0.5, 1, 2, 4, 5} {
		n, words := render(speed)
		ratio := float64(n) / float64(n1)
		if math.Abs(ratio*speed-1) > 0.05 || len(words) != len(words1) {
			t.Fatalf("speed %g: duration ratio %.4f (want %.4f), %d words (want %d)", speed, ratio, 1/speed, len(words), len(words1))
		}
		dev := 0.0
		for i, w := range words {
			want := float64(words1[i].Sample) / Rate / speed
			dev = max(dev, math.Abs(float64(w.Sample)/Rate-want))
		}
		if dev > 0.010 {
			t.Errorf("speed %g: a word starts %.2f ms off its start at speed 1 over speed", speed, dev*1000)
		}
		t.Logf("speed %g: %.3f s (speed 1: %.3f s), ratio %.4f, word starts within %.3f ms", speed, float64(n)/Rate, float64(n1)/Rate, ratio, dev*1000)
	}
}
