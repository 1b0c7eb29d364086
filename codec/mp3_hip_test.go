//go:build !nomp3

package codec

import (
	"bytes"
	"io"
	"math"
	"testing"

	"github.com/hajimehoshi/go-mp3"
)

// TestDecodeMP3Speech22k: 22.05 kHz (MPEG-2) MP3s that lame made from
// espeak-ng speech decode, through DecodeClip's hip path, to audio that
// correlates >= 0.95 with the original WAV after alignment. Where the file
// carries a LAME tag (at 64 kbit/s; the 32 kbit/s frames are too small for
// one) the decode is also gapless: same length, no lag. go-mp3's decode
// of the same file is logged for comparison; it is the decoder this path
// replaced, and at 32 kbit/s it gives noise (correlation ~0.3).
func TestDecodeMP3Speech22k(t *testing.T) {
	c := clips(t)
	ref, refRate, err := ReadWAV(bytes.NewReader(c["speech.wav"]))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		tagged bool
	}{{"speech.mp3", true}, {"speech32.mp3", false}} {
		got, rate, err := DecodeClip(c[tt.name])
		if err != nil {
			t.Fatal(err)
		}
		if rate != 22050 || refRate != 22050 {
			t.Fatalf("%s: rates: mp3 %d, wav %d; want 22050", tt.name, rate, refRate)
		}
		corr, lag := bestCorrelation(ref, got, 2*lameDelay)
		t.Logf("%s: hip: %d samples for %d, correlation %.4f at lag %d, SNR %.1f dB",
			tt.name, len(got), len(ref), corr, lag, snrAt(ref, got, lag))
		if corr < 0.95 {
			t.Errorf("%s: hip decode correlates %.4f with the original, want >= 0.95", tt.name, corr)
		}
		if d := len(got) - len(ref); tt.tagged && (lag != 0 || d < 0 || d > 1) {
			t.Errorf("%s: lag %d, %d samples for %d: the LAME tag's delay and padding should be trimmed", tt.name, lag, len(got), len(ref))
		}
		gm := goMP3Mono(t, c[tt.name])
		gc, glag := bestCorrelation(ref, gm, 2*lameDelay)
		t.Logf("%s: go-mp3: %d samples, correlation %.4f at lag %d, SNR %.1f dB", tt.name, len(gm), gc, glag, snrAt(ref, gm, glag))
	}
}

// goMP3Mono decodes with go-mp3 (16-bit stereo out) and mixes to mono.
func goMP3Mono(t *testing.T, b []byte) []float32 {
	t.Helper()
	d, err := mp3.NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	pcm, err := io.ReadAll(d)
	if err != nil {
		t.Fatal(err)
	}
	s16, err := DecodePCM(S16LE, pcm[:len(pcm)&^3])
	if err != nil {
		t.Fatal(err)
	}
	mono := make([]float32, len(s16)/2)
	for i := range mono {
		mono[i] = (s16[2*i] + s16[2*i+1]) / 2
	}
	return mono
}

// snrAt is the signal-to-error ratio of got against ref at a lag, in dB.
func snrAt(ref, got []float32, lag int) float64 {
	var sig, noise float64
	for i := 0; i < len(ref) && i+lag < len(got); i++ {
		e := float64(got[i+lag]) - float64(ref[i])
		sig += float64(ref[i]) * float64(ref[i])
		noise += e * e
	}
	return 10 * math.Log10(sig/(noise+1e-30))
}
