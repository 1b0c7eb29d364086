package codec

import (
	"errors"
	"math"
	"testing"
)

// resampleAll runs in through a fresh resampler in chunks of the given
// sizes (cycled), then flushes.
func resampleAll(t *testing.T, in []float32, inRate, outRate int, chunks []int) []float32 {
	t.Helper()
	r, err := NewResampler(inRate, outRate)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []float32
	for i := 0; len(in) > 0; i++ {
		n := min(chunks[i%len(chunks)], len(in))
		if out, err = r.Process(out, in[:n]); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	if out, err = r.Flush(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResampleSine: a 1 kHz tone keeps its frequency within 1 Hz and its
// level within 0.5 dB, and the output has the length the ratio implies.
func TestResampleSine(t *testing.T) {
	const inRate = 22050
	in := sine(inRate, inRate, 1000, 0.5) // one second
	for _, outRate := range []int{8000, 16000, 24000, 44100, 48000} {
		out := resampleAll(t, in, inRate, outRate, []int{len(in)})
		if d := len(out) - outRate; d < -2 || d > 2 {
			t.Errorf("%d Hz: %d samples, want %d", outRate, len(out), outRate)
		}
		mid := out[outRate/10 : len(out)-outRate/10] // away from the edges
		if f := zeroCrossFreq(t, mid, outRate); math.Abs(f-1000) > 1 {
			t.Errorf("%d Hz: frequency %.3f, want 1000 ± 1", outRate, f)
		}
		if db := 20 * math.Log10(rms(mid)/rms(in)); math.Abs(db) > 0.5 {
			t.Errorf("%d Hz: level changed by %.3f dB", outRate, db)
		}
	}
}

// TestResampleChunked: the state carries across calls, so odd chunk sizes
// give the same output as one call.
func TestResampleChunked(t *testing.T) {
	in := voiceLike(22050, 22050)
	for _, outRate := range []int{8000, 24000, 44100, 48000} {
		whole := resampleAll(t, in, 22050, outRate, []int{len(in)})
		chunked := resampleAll(t, in, 22050, outRate, []int{1, 7, 441, 1000, 3, 4096, 220})
		if len(whole) != len(chunked) {
			t.Fatalf("%d Hz: whole %d samples, chunked %d", outRate, len(whole), len(chunked))
		}
		for i := range whole {
			if d := math.Abs(float64(whole[i] - chunked[i])); d > 1e-4 {
				t.Fatalf("%d Hz: sample %d differs by %g", outRate, i, d)
			}
		}
	}
}

// TestResampleFirstChunkNotHeldBack: a 20 ms first chunk already yields
// output (soxr's default set-up would hold back ~50 ms).
func TestResampleFirstChunkNotHeldBack(t *testing.T) {
	for _, outRate := range []int{8000, 11025, 12000, 16000, 24000, 32000, 44100, 48000} {
		r, err := NewResampler(22050, outRate)
		if err != nil {
			t.Fatal(err)
		}
		out, err := r.Process(nil, voiceLike(441, 22050))
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := outRate / 50 / 4; len(out) < want {
			t.Errorf("%d Hz: first 20 ms chunk gave %d samples, want ≥ %d", outRate, len(out), want)
		}
	}
}

func TestResamplerLifecycle(t *testing.T) {
	r, err := NewResampler(22050, 24000)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := r.Process(nil, nil); err != nil || len(out) != 0 {
		t.Fatalf("empty Process = %d, %v", len(out), err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := r.Process(nil, []float32{0}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Process after Close: %v", err)
	}
	if _, err := r.Flush(nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Flush after Close: %v", err)
	}
	for _, rates := range [][2]int{{0, 8000}, {8000, -1}, {8000, 1 << 30}} {
		if _, err := NewResampler(rates[0], rates[1]); err == nil {
			t.Errorf("NewResampler%v: no error", rates)
		}
	}
}
