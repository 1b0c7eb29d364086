package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

var g711Formats = []Format{MuLaw, ALaw}

// soxG711 encodes s16le input with sox. -D turns off the dither sox
// otherwise adds when it lowers the bit depth (16 to 14 or 13 bits), which
// would make its output random.
func soxG711(t *testing.T, f Format, s16 []byte) []byte {
	t.Helper()
	if _, err := exec.LookPath("sox"); err != nil {
		t.Skip("sox is not installed (scripts/deps.sh installs it)")
	}
	enc := map[Format]string{MuLaw: "mu-law", ALaw: "a-law"}[f]
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.raw"), filepath.Join(dir, "out.raw")
	if err := os.WriteFile(in, s16, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sox", "-D", "-t", "raw", "-e", "signed", "-b", "16", "-r", "8000", "-c", "1", in,
		"-t", "raw", "-e", enc, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sox: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestG711MatchesSox: every one of the 65,536 16-bit values, and a voice-like
// signal through the float path, encode to exactly sox's bytes.
func TestG711MatchesSox(t *testing.T) {
	all := make([]float32, 0, 1<<16)
	var allS16 []byte
	for v := -32768; v < 32768; v++ {
		all = append(all, float32(v)/(1<<15))
		allS16 = binary.LittleEndian.AppendUint16(allS16, uint16(v))
	}
	voice := voiceLike(8000, 8000)
	for i := range voice {
		voice[i] *= 3 // over full scale: the clipping path too
	}
	// sox reads 16-bit input: give both sides the same 16-bit values.
	voiceS16 := AppendPCM(nil, S16LE, voice)
	voice, _ = DecodePCM(S16LE, voiceS16)
	for _, f := range g711Formats {
		t.Run(string(f), func(t *testing.T) {
			for _, c := range []struct {
				name string
				in   []float32
				s16  []byte
			}{{"every-code", all, allS16}, {"voice-clipped", voice, voiceS16}} {
				got, want := AppendPCM(nil, f, c.in), soxG711(t, f, c.s16)
				if len(got) != len(want) {
					t.Fatalf("%s: %d bytes, sox %d", c.name, len(got), len(want))
				}
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s: sample %d (%v): %#02x, sox %#02x", c.name, i, c.in[i], got[i], want[i])
					}
				}
			}
		})
	}
}

// TestG711RoundTrip: voice-like audio at several levels keeps an SNR of at
// least 30 dB through encode and decode (G.711 keeps 35-38 dB over some
// 20 dB of level below full scale, then falls off: at gain 0.03 A-law
// measures 27 dB, mu-law 31 dB), and every code decodes and re-encodes
// to itself, so a G.711 stream passes a decode/encode cycle untouched.
func TestG711RoundTrip(t *testing.T) {
	for _, f := range g711Formats {
		t.Run(string(f), func(t *testing.T) {
			for _, gain := range []float32{1, 0.3, 0.1} {
				in := voiceLike(8000, 8000)
				for i := range in {
					in[i] *= gain
				}
				out, err := DecodePCM(f, AppendPCM(nil, f, in))
				if err != nil {
					t.Fatal(err)
				}
				if snr := snrDB(in, out); snr < 30 {
					t.Errorf("gain %v: SNR %.1f dB, want >= 30", gain, snr)
				} else {
					t.Logf("gain %v: SNR %.1f dB", gain, snr)
				}
			}
			codes := make([]byte, 256)
			for i := range codes {
				codes[i] = byte(i)
			}
			s, err := DecodePCM(f, codes)
			if err != nil {
				t.Fatal(err)
			}
			back := AppendPCM(nil, f, s)
			for i := range codes {
				// mu-law's 0x7F and 0xFF both mean zero; zero encodes as 0xFF.
				if back[i] != codes[i] && !(f == MuLaw && codes[i] == 0x7F && back[i] == 0xFF) {
					t.Fatalf("code %#02x -> %v -> %#02x", codes[i], s[i], back[i])
				}
			}
		})
	}
}

// TestG711Edges: silence, full scale, NaN and out-of-range values.
func TestG711Edges(t *testing.T) {
	nan := float32(math.NaN())
	in := []float32{0, 1, -1, 2, -2, nan, maxF32}
	want := map[Format][]byte{
		// zero, +max, -max, +max (clipped), -max, NaN as zero, +max
		MuLaw: {0xFF, 0x80, 0x00, 0x80, 0x00, 0xFF, 0x80},
		ALaw:  {0xD5, 0xAA, 0x2A, 0xAA, 0x2A, 0xD5, 0xAA},
	}
	for _, f := range g711Formats {
		if got := AppendPCM(nil, f, in); !bytes.Equal(got, want[f]) {
			t.Errorf("%s: % x, want % x", f, got, want[f])
		}
		if f.BytesPerSample() != 1 || !f.IsPCM() || f.IsLinearPCM() || !f.IsG711() {
			t.Errorf("%s: width %d, IsPCM %v, IsLinearPCM %v", f, f.BytesPerSample(), f.IsPCM(), f.IsLinearPCM())
		}
		if g, ok := ParseFormat(string(f)); !ok || g != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, g, ok)
		}
	}
	// The containers are not output_format names.
	for _, f := range []Format{OggOpus, FLAC} {
		if _, ok := ParseFormat(string(f)); ok || f.IsPCM() || f.BytesPerSample() != 0 {
			t.Errorf("%s: ParseFormat accepts it or it counts as raw", f)
		}
	}
}

// TestPipelineG711: a 1 kHz tone at telephony and other rates through the
// pipeline (resampled by soxr) comes back at the right length and pitch.
func TestPipelineG711(t *testing.T) {
	in := sine(22050, 22050, 1000, 0.5)
	for _, f := range g711Formats {
		for _, rate := range []int{8000, 16000, 48000} {
			p, units := pipe(t, f, rate, in)
			if p.Rate() != rate {
				t.Fatalf("%s: Rate() = %d, want %d", f, p.Rate(), rate)
			}
			out, err := DecodePCM(f, bytes.Join(units, nil))
			if err != nil {
				t.Fatal(err)
			}
			if d := len(out) - rate; d < -2 || d > 2 {
				t.Errorf("%s@%d: %d samples, want %d", f, rate, len(out), rate)
			}
			if hz := zeroCrossFreq(t, out[rate/10:len(out)-rate/10], rate); math.Abs(hz-1000) > 2 {
				t.Errorf("%s@%d: tone at %.1f Hz", f, rate, hz)
			}
		}
	}
}

// snrDB is the ratio of the reference's power to the error's, in dB.
func snrDB(ref, got []float32) float64 {
	var sig, noise float64
	for i := range ref {
		d := float64(got[i]) - float64(ref[i])
		sig += float64(ref[i]) * float64(ref[i])
		noise += d * d
	}
	return 10 * math.Log10(sig/noise)
}

func FuzzDecodeG711(f *testing.F) {
	f.Add([]byte{0x00, 0x7F, 0x80, 0xFF, 0xD5, 0x55})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, f := range g711Formats {
			s, err := DecodePCM(f, b)
			if err != nil || len(s) != len(b) {
				t.Fatalf("%s: %d samples from %d bytes, %v", f, len(s), len(b), err)
			}
			for _, v := range s {
				if !(v >= -1 && v < 1) {
					t.Fatalf("%s: sample %v out of [-1, 1)", f, v)
				}
			}
		}
	})
}
