package codec

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

var clipCache struct {
	once sync.Once
	m    map[string][]byte
}

// clips makes the uploads of the decoder tests with the real tools, once
// per test binary: espeak-ng speech (22050 Hz mono) and a sox stereo tone,
// converted by sox, lame, flac and opusenc. Keyed by file name.
func clips(t *testing.T) map[string][]byte {
	t.Helper()
	clipCache.once.Do(func() { clipCache.m = makeClips(t) })
	if clipCache.m == nil {
		t.Fatal("making test clips failed")
	}
	return clipCache.m
}

func makeClips(t *testing.T) map[string][]byte {
	t.Helper()
	dir, err := os.MkdirTemp("", "codec-clips")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	p := func(name string) string { return filepath.Join(dir, name) }
	run(t, "espeak-ng", "-w", p("speech.wav"), "The quick brown fox jumps over the lazy dog.")
	run(t, "sox", "-n", "-r", "44100", "-c", "2", "-b", "24", p("tone.wav"), "synth", "1", "sine", "1000", "vol", "0.5")
	run(t, "lame", "--quiet", "-b", "64", p("speech.wav"), p("speech.mp3"))
	// 32 kbit/s at 22050 Hz: go-mp3 decodes this one to noise.
	run(t, "lame", "--quiet", "-b", "32", p("speech.wav"), p("speech32.mp3"))
	run(t, "lame", "--quiet", "--add-id3v2", "--tt", "tone", p("tone.wav"), p("tone.mp3"))
	run(t, "flac", "--silent", "-o", p("speech.flac"), p("speech.wav"))
	run(t, "flac", "--silent", "-o", p("tone.flac"), p("tone.wav"))
	run(t, "opusenc", "--quiet", p("speech.wav"), p("speech.opus"))
	run(t, "opusenc", "--quiet", p("tone.wav"), p("tone.opus"))
	run(t, "sox", p("tone.wav"), p("tone.ogg")) // Ogg Vorbis: not ours
	run(t, "sox", p("tone.wav"), p("tone.aiff"))
	out := map[string][]byte{}
	for _, n := range []string{"speech.wav", "tone.wav", "speech.mp3", "speech32.mp3", "tone.mp3", "speech.flac",
		"tone.flac", "speech.opus", "tone.opus", "tone.ogg", "tone.aiff"} {
		out[n] = readFile(t, p(n))
	}
	return out
}

func TestDecodeClip(t *testing.T) {
	c := clips(t)
	speech, _, err := ReadWAV(bytes.NewReader(c["speech.wav"]))
	if err != nil {
		t.Fatal(err)
	}
	speechSec := float64(len(speech)) / 22050
	tests := []struct {
		name    string
		rate    int
		seconds float64
		slack   float64 // codec padding, in seconds
	}{
		{"speech.wav", 22050, speechSec, 0},
		{"speech.mp3", 22050, speechSec, 0.1},
		{"speech32.mp3", 22050, speechSec, 0.1},
		{"speech.flac", 22050, speechSec, 0},
		{"speech.opus", 48000, speechSec, 0.01},
		{"tone.wav", 44100, 1, 0},
		{"tone.mp3", 44100, 1, 0.1},
		{"tone.flac", 44100, 1, 0},
		{"tone.opus", 48000, 1, 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, rate, err := DecodeClip(c[tt.name])
			if err != nil {
				t.Fatal(err)
			}
			sec := float64(len(s)) / float64(rate)
			if rate != tt.rate || sec < tt.seconds-0.001 || sec > tt.seconds+tt.slack+0.001 {
				t.Fatalf("%.4f s at %d Hz, want %.4f s (+%.2f) at %d", sec, rate, tt.seconds, tt.slack, tt.rate)
			}
			if r := rms(s); r < 0.01 {
				t.Fatalf("RMS %.4f: silence", r)
			}
			if tt.name[:4] == "tone" {
				mid := s[rate/10 : rate*9/10]
				if f := zeroCrossFreq(t, mid, rate); math.Abs(f-1000) > 1 {
					t.Errorf("frequency %.2f", f)
				}
				if r := rms(mid); math.Abs(20*math.Log10(r/(0.5/math.Sqrt2))) > 0.5 {
					t.Errorf("level %.4f RMS", r)
				}
			}
		})
	}
	// Lossless containers give back the same samples as the WAV.
	flac, _, _ := DecodeClip(c["speech.flac"])
	for i := range speech {
		if flac[i] != speech[i] {
			t.Fatalf("flac sample %d = %v, wav %v", i, flac[i], speech[i])
		}
	}
}

func TestDecodeClipErrors(t *testing.T) {
	c := clips(t)
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrUnknownFormat},
		{"text", []byte("hello, this is not audio"), ErrUnknownFormat},
		{"ogg vorbis", c["tone.ogg"], ErrUnknownFormat},
		{"aiff", c["tone.aiff"], ErrUnknownFormat},
		{"flac magic only", []byte("fLaC"), ErrCorrupt},
		{"flac truncated", c["tone.flac"][:100], ErrCorrupt},
		{"ogg magic only", []byte("OggS"), ErrUnknownFormat},
		{"opus truncated", c["tone.opus"][:200], ErrCorrupt},
		{"mp3 id3 only", []byte("ID3\x04\x00\x00\x00\x00\x00\x00"), ErrCorrupt},
		{"mp3 sync garbage", append([]byte{0xFF, 0xFB, 0x90, 0x00}, make([]byte, 50)...), ErrCorrupt},
		{"wav header only", c["tone.wav"][:12], ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := DecodeClip(tt.in); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestDecodeClipTruncations cuts every clip at many points: any outcome
// but a panic or an untyped error is acceptable.
func TestDecodeClipTruncations(t *testing.T) {
	for name, b := range clips(t) {
		for cut := 0; cut < len(b); cut += 1 + len(b)/40 {
			checkDecodeErr(t, name, b[:cut])
		}
	}
}

// checkDecodeErr decodes b and fails on an error of an unexpected kind.
func checkDecodeErr(t *testing.T, name string, b []byte) {
	t.Helper()
	_, rate, err := DecodeClip(b)
	switch {
	case err == nil && rate <= 0:
		t.Errorf("%s (%d bytes): no error and rate %d", name, len(b), rate)
	case err != nil && !errors.Is(err, ErrUnknownFormat) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLong):
		t.Errorf("%s (%d bytes): untyped error %v", name, len(b), err)
	}
}
