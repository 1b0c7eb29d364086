package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

var pcmFormats = []Format{S16LE, S24LE, S32LE, F32LE, F64LE}

func TestParseFormat(t *testing.T) {
	tests := []struct {
		in   string
		want Format
		ok   bool
	}{
		{"s16le", S16LE, true}, {"s24le", S24LE, true}, {"s32le", S32LE, true},
		{"f32le", F32LE, true}, {"f64le", F64LE, true}, {"wav", WAV, true},
		{"opus", Opus, true}, {"mp3", MP3, true},
		{"S16LE", "", false}, {"pcm", "", false}, {"", "", false}, {" wav", "", false},
	}
	for _, tt := range tests {
		got, ok := ParseFormat(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseFormat(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBytesPerSample(t *testing.T) {
	want := map[Format]int{S16LE: 2, S24LE: 3, S32LE: 4, F32LE: 4, F64LE: 8, WAV: 0, Opus: 0, MP3: 0}
	for f, n := range want {
		if got := f.BytesPerSample(); got != n {
			t.Errorf("%s.BytesPerSample() = %d, want %d", f, got, n)
		}
		if f.IsPCM() != (n > 0) {
			t.Errorf("%s.IsPCM() = %v", f, f.IsPCM())
		}
	}
}

// lsb is the quantisation step of each format, as a float.
func lsb(f Format) float64 {
	switch f {
	case S16LE:
		return 1.0 / (1 << 15)
	case S24LE:
		return 1.0 / (1 << 23)
	case S32LE:
		return 1.0 / (1 << 31)
	}
	return 0 // float formats are exact
}

// TestPCMRoundTripFloat: float -> bytes -> float within one LSB (exact
// for the float formats), over random values and the edges.
func TestPCMRoundTripFloat(t *testing.T) {
	in := []float32{0, 0.5, -0.5, -1, maxF32, 1e-9, -1e-9, 0.123456789, -0.987654321}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		in = append(in, r.Float32()*2-1)
	}
	for _, f := range pcmFormats {
		t.Run(string(f), func(t *testing.T) {
			b := AppendPCM(nil, f, in)
			if len(b) != len(in)*f.BytesPerSample() {
				t.Fatalf("got %d bytes, want %d", len(b), len(in)*f.BytesPerSample())
			}
			out, err := DecodePCM(f, b)
			if err != nil {
				t.Fatal(err)
			}
			for i := range in {
				if d := math.Abs(float64(out[i]) - float64(in[i])); d > lsb(f) {
					t.Fatalf("sample %d: %v -> %v, off by %g > 1 LSB", i, in[i], out[i], d)
				}
			}
		})
	}
}

// TestPCMRoundTripBytes: every integer code decodes and re-encodes to
// the same bytes, so a PCM stream passes through untouched.
func TestPCMRoundTripBytes(t *testing.T) {
	for _, f := range pcmFormats {
		t.Run(string(f), func(t *testing.T) {
			b := edgeCodes(f)
			s, err := DecodePCM(f, b)
			if err != nil {
				t.Fatal(err)
			}
			if got := AppendPCM(nil, f, s); !bytes.Equal(got, b) {
				t.Fatalf("re-encoded bytes differ:\n got %x\nwant %x", got, b)
			}
		})
	}
}

// edgeCodes returns full-scale, zero, ±1 LSB and random codes in f.
func edgeCodes(f Format) []byte {
	var b []byte
	le := binary.LittleEndian
	r := rand.New(rand.NewPCG(3, 4))
	switch f {
	case S16LE:
		for _, v := range []int16{-32768, -1, 0, 1, 32767} {
			b = le.AppendUint16(b, uint16(v))
		}
		for range 1000 {
			b = le.AppendUint16(b, uint16(r.Uint32()))
		}
	case S24LE:
		for _, v := range []int32{-1 << 23, -1, 0, 1, 1<<23 - 1} {
			b = append(b, byte(v), byte(v>>8), byte(v>>16))
		}
		for range 1000 {
			v := r.Uint32()
			b = append(b, byte(v), byte(v>>8), byte(v>>16))
		}
	case S32LE:
		// float32 holds 24 significant bits: codes beyond that are not
		// representable, so test the codes a float32 signal can produce.
		for _, v := range []int32{-1 << 31, -256, 0, 256, 1<<31 - 128} {
			b = le.AppendUint32(b, uint32(v))
		}
		for range 1000 {
			b = le.AppendUint32(b, uint32(int32(r.Uint32())>>8<<8))
		}
	case F32LE:
		for _, v := range []float32{-1, 0, 0.25, maxF32, -maxF32} {
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	case F64LE:
		for _, v := range []float32{-1, 0, 0.25, maxF32, -maxF32} {
			b = le.AppendUint64(b, math.Float64bits(float64(v)))
		}
	}
	return b
}

func TestAppendPCMClipsAndRounds(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	in := []float32{1, 2, -1, -2, nan, inf, -inf, 0.5 / 32768, -0.5 / 32768, 1.5 / 32768}
	tests := []struct {
		f    Format
		want []float64
	}{
		{S16LE, []float64{32767, 32767, -32768, -32768, 0, 32767, -32768, 1, 0, 2}},
		{S24LE, []float64{1<<23 - 1, 1<<23 - 1, -1 << 23, -1 << 23, 0, 1<<23 - 1, -1 << 23, 128, -128, 384}},
		{F32LE, []float64{float64(maxF32), float64(maxF32), -1, -1, 0, float64(maxF32), -1, 0.5 / 32768, -0.5 / 32768, 1.5 / 32768}},
	}
	for _, tt := range tests {
		got, err := DecodePCM(tt.f, AppendPCM(nil, tt.f, in))
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range tt.want {
			if tt.f != F32LE {
				w *= lsb(tt.f)
			}
			if float64(got[i]) != float64(float32(w)) {
				t.Errorf("%s: in %v: got %v, want %v", tt.f, in[i], got[i], float32(w))
			}
		}
	}
}

func TestAppendPCMKeepsPrefix(t *testing.T) {
	dst := []byte("head")
	got := AppendPCM(dst, S16LE, []float32{0.5})
	if string(got[:4]) != "head" || len(got) != 6 {
		t.Fatalf("got %q", got)
	}
}

func TestDecodePCMErrors(t *testing.T) {
	tests := []struct {
		f Format
		b []byte
	}{
		{S16LE, []byte{1}}, {S24LE, []byte{1, 2}}, {F64LE, make([]byte, 7)}, {WAV, nil}, {"x", nil},
	}
	for _, tt := range tests {
		if _, err := DecodePCM(tt.f, tt.b); err == nil {
			t.Errorf("DecodePCM(%s, %d bytes): no error", tt.f, len(tt.b))
		}
	}
}
