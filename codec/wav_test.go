package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// ourWAV writes samples as a one-shot WAV in format f (s16/s24/s32/f32/f64).
func ourWAV(rate int, f Format, s []float32) []byte {
	float := f == F32LE || f == F64LE
	pcm := AppendPCM(nil, f, s)
	b := AppendWAVHeader(nil, rate, 8*f.BytesPerSample(), float, len(pcm))
	return append(b, pcm...)
}

func TestWAVRoundTrip(t *testing.T) {
	in := voiceLike(2400, 24000)
	for _, f := range pcmFormats {
		t.Run(string(f), func(t *testing.T) {
			got, rate, err := ReadWAV(bytes.NewReader(ourWAV(24000, f, in)))
			if err != nil {
				t.Fatal(err)
			}
			if rate != 24000 || len(got) != len(in) {
				t.Fatalf("rate %d, %d samples; want 24000, %d", rate, len(got), len(in))
			}
			for i := range in {
				if d := math.Abs(float64(got[i] - in[i])); d > lsb(f) {
					t.Fatalf("sample %d off by %g", i, d)
				}
			}
		})
	}
}

// g711WAV writes samples as a one-shot G.711 WAV (AppendG711WAVHeader).
func g711WAV(t *testing.T, f Format, rate int, s []float32) []byte {
	t.Helper()
	raw := AppendPCM(nil, f, s)
	b, ok := AppendG711WAVHeader(nil, f, rate, len(raw))
	if !ok {
		t.Fatalf("AppendG711WAVHeader(%s) refused", f)
	}
	return append(b, raw...)
}

// TestG711WAVRoundTrip: the G.711 WAV header carries the rate, the format
// tag and the sizes, and ReadWAV expands the samples as DecodePCM does;
// other formats are refused.
func TestG711WAVRoundTrip(t *testing.T) {
	in := voiceLike(800, 8000)
	for _, f := range []Format{MuLaw, ALaw} {
		b := g711WAV(t, f, 8000, in)
		if len(b) != 44+len(in) {
			t.Fatalf("%s: %d bytes", f, len(b))
		}
		got, rate, err := ReadWAV(bytes.NewReader(b))
		if err != nil || rate != 8000 {
			t.Fatalf("%s: ReadWAV = %d Hz, %v", f, rate, err)
		}
		want, _ := DecodePCM(f, b[44:])
		if len(got) != len(want) {
			t.Fatalf("%s: %d samples, want %d", f, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: sample %d = %g, want %g", f, i, got[i], want[i])
			}
		}
	}
	if _, ok := AppendG711WAVHeader(nil, S16LE, 8000, 0); ok {
		t.Fatal("s16le accepted")
	}
}

func TestWAVStreamingHeader(t *testing.T) {
	in := sine(1000, 22050, 440, 0.5)
	b := append(AppendWAVHeader(nil, 22050, 16, false, -1), AppendPCM(nil, S16LE, in)...)
	if len(b) != 44+2000 {
		t.Fatalf("got %d bytes", len(b))
	}
	got, rate, err := ReadWAV(bytes.NewReader(b))
	if err != nil || rate != 22050 || len(got) != len(in) {
		t.Fatalf("ReadWAV = %d samples, %d Hz, %v", len(got), rate, err)
	}
}

// TestWAVAcceptedBySox: soxi reads our headers (one-shot and streaming)
// with the rate, width, encoding and length we meant.
func TestWAVAcceptedBySox(t *testing.T) {
	in := sine(4800, 24000, 1000, 0.5)
	tests := []struct {
		name string
		wav  []byte
		want []string
	}{
		{"s16", ourWAV(24000, S16LE, in), []string{"24000", "16-bit Signed Integer PCM", "4800 samples"}},
		{"s24", ourWAV(24000, S24LE, in), []string{"24-bit Signed Integer PCM", "4800 samples"}},
		{"f32", ourWAV(24000, F32LE, in), []string{"32-bit Floating Point PCM", "4800 samples"}},
		{"f64", ourWAV(24000, F64LE, in), []string{"64-bit Floating Point PCM", "4800 samples"}},
		{"streaming", append(AppendWAVHeader(nil, 24000, 16, false, -1), AppendPCM(nil, S16LE, in)...),
			[]string{"24000", "16-bit Signed Integer PCM"}},
		{"mulaw", g711WAV(t, MuLaw, 8000, in), []string{"8000", "u-law", "4800 samples"}},
		{"alaw", g711WAV(t, ALaw, 8000, in), []string{"8000", "A-law", "4800 samples"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := string(run(t, "soxi", tempFile(t, "x.wav", tt.wav)))
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("soxi output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestReadWAVFromSox reads files sox writes in every encoding we accept,
// including WAVE_FORMAT_EXTENSIBLE (sox uses it for >2 channels and >16
// bits) and several channels mixed down.
func TestReadWAVFromSox(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"u8", []string{"-b", "8", "-e", "unsigned-integer"}},
		{"s16", []string{"-b", "16"}},
		{"s24", []string{"-b", "24"}},
		{"s32", []string{"-b", "32"}},
		{"f32", []string{"-b", "32", "-e", "floating-point"}},
		{"f64", []string{"-b", "64", "-e", "floating-point"}},
		{"stereo", []string{"-b", "16", "-c", "2"}},
		{"6ch-extensible", []string{"-b", "24", "-c", "6"}},
		{"rate-11025", []string{"-b", "16", "-r", "11025"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rate := 16000
			if tt.args[len(tt.args)-2] == "-r" {
				rate = 11025
			}
			p := filepath.Join(t.TempDir(), "x.wav")
			args := append([]string{"-n", "-r", "16000"}, tt.args...)
			run(t, "sox", append(args, p, "synth", "0.5", "sine", "1000", "vol", "0.5")...)
			got, gotRate, err := ReadWAV(bytes.NewReader(readFile(t, p)))
			if err != nil {
				t.Fatal(err)
			}
			if gotRate != rate || len(got) != rate/2 {
				t.Fatalf("got %d samples at %d Hz, want %d at %d", len(got), gotRate, rate/2, rate)
			}
			if r := rms(got); math.Abs(r-0.5/math.Sqrt2) > 0.01 {
				t.Errorf("RMS %.4f, want %.4f", r, 0.5/math.Sqrt2)
			}
			if f := zeroCrossFreq(t, got, rate); math.Abs(f-1000) > 1 {
				t.Errorf("frequency %.2f Hz, want 1000", f)
			}
		})
	}
}

// TestReadWAVSkipsChunks: LIST and odd-sized chunks before the data are
// skipped, including the RIFF pad byte.
func TestReadWAVSkipsChunks(t *testing.T) {
	in := sine(100, 8000, 440, 0.5)
	full := ourWAV(8000, S16LE, in)
	var b []byte
	b = append(b, full[:36]...) // RIFF, WAVE, fmt chunk
	b = append(b, "LIST"...)
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = append(b, 'a', 'b', 'c', 0) // odd size plus pad byte
	b = append(b, full[36:]...)
	got, _, err := ReadWAV(bytes.NewReader(b))
	if err != nil || len(got) != len(in) {
		t.Fatalf("got %d samples, %v", len(got), err)
	}
}

func TestReadWAVErrors(t *testing.T) {
	good := ourWAV(8000, S16LE, sine(10, 8000, 440, 0.5))
	withFmt := func(tag, ch uint16, rate uint32, bits uint16) []byte {
		b := bytes.Clone(good)
		le := binary.LittleEndian
		le.PutUint16(b[20:], tag)
		le.PutUint16(b[22:], ch)
		le.PutUint32(b[24:], rate)
		le.PutUint16(b[34:], bits)
		return b
	}
	tests := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrUnknownFormat},
		{"not riff", []byte("RIFX0000WAVEfmt "), ErrUnknownFormat},
		{"no data", good[:36], ErrCorrupt},
		{"data before fmt", append([]byte("RIFF\x00\x00\x00\x00WAVE"), good[36:]...), ErrCorrupt},
		{"zero channels", withFmt(1, 0, 8000, 16), ErrCorrupt},
		{"zero rate", withFmt(1, 1, 0, 16), ErrCorrupt},
		{"12-bit", withFmt(1, 1, 8000, 12), ErrUnknownFormat},
		{"float16", withFmt(3, 1, 8000, 16), ErrUnknownFormat},
		{"adpcm", withFmt(2, 1, 8000, 4), ErrUnknownFormat},
		{"truncated fmt", good[:30], ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := ReadWAV(bytes.NewReader(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestReadWAVTruncatedData: a data chunk shorter than declared yields
// the whole frames that are there.
func TestReadWAVTruncatedData(t *testing.T) {
	b := ourWAV(8000, S16LE, sine(100, 8000, 440, 0.5))
	got, _, err := ReadWAV(bytes.NewReader(b[:len(b)-51]))
	if err != nil || len(got) != 74 {
		t.Fatalf("got %d samples, %v; want 74", len(got), err)
	}
}
