package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestAppendPCMMatchesQuantize: the packed fast paths give the codes of
// the reference quantize (and clipF32 for floats) for every sample, at
// each tail length, for aligned and unaligned destinations. The inputs
// crowd around the fast-path limits, ±1, halves of an LSB, and NaN/Inf.
func TestAppendPCMMatchesQuantize(t *testing.T) {
	in := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, -0, 1, -1, maxF32, -maxF32}
	for _, lim := range []float32{fast16, fast24, fast32, maxF32} {
		for _, x := range []float32{lim, -lim} {
			up, down := x, x // a few float32 steps either side of the limit
			for range 3 {
				up, down = math.Nextafter32(up, 2), math.Nextafter32(down, -2)
				in = append(in, up, down)
			}
			in = append(in, x)
		}
	}
	for _, scale := range []float64{1 << 15, 1 << 23} {
		for k := -40; k <= 40; k++ {
			in = append(in, float32((float64(k)+0.5)/scale), math.Nextafter32(float32((float64(k)+0.5)/scale), 0))
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 5000 {
		in = append(in, r.Float32()*2.2-1.1)
	}
	want := func(f Format, x float32) []byte {
		var b []byte
		le := binary.LittleEndian
		switch f {
		case S16LE:
			b = le.AppendUint16(b, uint16(quantize(x, 1<<15)))
		case S24LE:
			v := quantize(x, 1<<23)
			b = append(b, byte(v), byte(v>>8), byte(v>>16))
		case S32LE:
			b = le.AppendUint32(b, uint32(quantize(x, 1<<31)))
		case F32LE:
			b = le.AppendUint32(b, math.Float32bits(clipF32(x)))
		case F64LE:
			b = le.AppendUint64(b, math.Float64bits(float64(clipF32(x))))
		}
		return b
	}
	for _, f := range pcmFormats {
		var ref []byte
		for _, x := range in {
			ref = append(ref, want(f, x)...)
		}
		for prefix := 0; prefix < 4; prefix++ { // 1-3: f32le's portable path
			for tail := 0; tail < 5; tail++ {
				n := len(in) - tail
				got := AppendPCM(make([]byte, prefix, prefix+1), f, in[:n])[prefix:]
				if w := ref[:n*f.BytesPerSample()]; !bytes.Equal(got, w) {
					for i := 0; i < n; i++ {
						bs := f.BytesPerSample()
						if !bytes.Equal(got[i*bs:(i+1)*bs], w[i*bs:(i+1)*bs]) {
							t.Fatalf("%s prefix %d: sample %d (%v) = %x, want %x", f, prefix, i, in[i], got[i*bs:(i+1)*bs], w[i*bs:(i+1)*bs])
						}
					}
				}
			}
		}
	}
}
