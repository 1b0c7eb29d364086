package espeak

import (
	"context"
	"fmt"
	"math"
	"testing"

	"voicesvc/engine"
)

// speedText is about 11 s at speed 1, in two sentences.
const speedText = "The quick brown fox jumps over the lazy dog, and then it rests in the warm afternoon sun. " +
	"Later that evening, the farmer counted his chickens twice, because one of them was missing again."

// TestSpeedExact: speed is an exact multiplier across the range (the API's
// 0.25-4 and the WebSocket's length_scale 0.2-5): the audio lasts 1/speed
// of its length at speed 1 (within 5%), every word starts at its start at
// speed 1 over speed (within 10 ms) and comes with the chunk holding its
// start, and the stretched audio is the same speech: its loudness
// envelope follows speed 1's on the stretched clock.
func TestSpeedExact(t *testing.T) {
	e := mustNew(t)
	for _, eager := range []bool{false, true} {
		e.SetEagerFirstChunk(eager)
		rate := float64(e.NativeRate())
		base := renderChunks(t, e, engine.Request{Text: speedText, Language: "en-US"})
		d1 := float64(len(base.samples)) / rate
		if d1 < 5 {
			t.Fatalf("speed 1 lasts %.2f s; the test needs at least 5", d1)
		}
		for _, speed := range []float64{0.2, 0.25, 0.5, 1, 2, 4, 5} {
			t.Run(fmt.Sprintf("eager=%v/speed=%g", eager, speed), func(t *testing.T) {
				r := renderChunks(t, e, engine.Request{Text: speedText, Language: "en-US", Params: engine.Params{Speed: speed}})
				ratio := float64(len(r.samples)) / rate / d1
				if math.Abs(ratio*speed-1) > 0.05 {
					t.Errorf("duration ratio %.4f, want %.4f", ratio, 1/speed)
				}
				if len(r.words) != len(base.words) {
					t.Fatalf("%d words, want %d", len(r.words), len(base.words))
				}
				dev := 0.0
				for i, w := range r.words {
					b := base.words[i]
					want := float64(b.Sample) / rate / speed
					got := float64(w.Sample) / rate
					dev = max(dev, math.Abs(got-want))
					if math.Abs(got-want) > 0.010 || w.TextOffset != b.TextOffset || w.Index != b.Index {
						t.Errorf("word %d %q: starts at %.4f s, want %.4f s", i, speedText[w.TextOffset:][:w.TextLength], got, want)
					}
				}
				if r.misplaced != "" {
					t.Error(r.misplaced)
				}
				c := envelopeCorrelation(base.samples, r.samples, speed, int(rate))
				if c < 0.8 {
					t.Errorf("envelope correlation with speed 1 on the stretched clock %.3f, want >= 0.8", c)
				}
				t.Logf("%.3f s at speed 1, %.3f s: ratio %.4f (1/speed %.4f); word starts off start/speed by %.2f ms at most; envelope correlation %.3f",
					d1, float64(len(r.samples))/rate, ratio, 1/speed, dev*1000, c)
			})
		}
	}
	e.SetEagerFirstChunk(false)
}

type chunks struct {
	result
	misplaced string // a word that came with a chunk not holding its start
}

func renderChunks(t *testing.T, e engine.Engine, req engine.Request) chunks {
	t.Helper()
	var r chunks
	err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
		start, end := len(r.samples), len(r.samples)+len(c.Samples)
		for _, w := range c.Words {
			if (w.Sample < start || w.Sample >= end && !(c.Last && w.Sample == end)) && r.misplaced == "" {
				r.misplaced = fmt.Sprintf("word at sample %d came with the chunk [%d, %d)", w.Sample, start, end)
			}
		}
		r.samples = append(r.samples, c.Samples...)
		r.words = append(r.words, c.Words...)
		if c.Last {
			r.sentences++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// envelopeCorrelation correlates the 100 ms RMS envelope of base with that
// of stretched read at speed times its clock.
func envelopeCorrelation(base, stretched []float32, speed float64, rate int) float64 {
	frame := rate / 10
	env := func(x []float32, at func(int) int, n, w int) []float64 {
		out := make([]float64, n)
		for i := range out {
			lo := at(i)
			hi := min(lo+w, len(x))
			out[i] = rms(x[min(lo, len(x)):hi])
		}
		return out
	}
	n := len(base) / frame
	a := env(base, func(i int) int { return i * frame }, n, frame)
	b := env(stretched, func(i int) int { return int(float64(i*frame) / speed) }, n, int(float64(frame)/speed))
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma /= float64(n)
	mb /= float64(n)
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}
