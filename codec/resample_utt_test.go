package codec

import (
	"fmt"
	"testing"
)

// BenchmarkResampleUtterance: what one request pays, 3 s from the engine
// rate in 100 ms chunks, including creating and closing the resampler.
func BenchmarkResampleUtterance(b *testing.B) {
	in := voiceLike(3*22050, 22050)
	for _, chunk := range []int{441, 2205} {
		b.Run(fmt.Sprintf("chunk=%d", chunk), func(b *testing.B) {
			buf := make([]float32, 0, 8192)
			rt := startRealtime()
			for b.Loop() {
				r, err := NewResampler(22050, 24000)
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(in); i += chunk {
					if buf, err = r.Process(buf[:0], in[i:min(i+chunk, len(in))]); err != nil {
						b.Fatal(err)
					}
				}
				buf, _ = r.Flush(buf[:0])
				r.Close()
			}
			rt.report(b, 3)
		})
	}
}

func BenchmarkResampleCreate(b *testing.B) {
	for b.Loop() {
		r, err := NewResampler(22050, 24000)
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
	}
}

// BenchmarkResampleRecipes compares libsoxr set-ups on what a request
// does (22050 -> 24000, 3 s in 100 ms chunks, create to close), with
// first-out, the samples the first chunk yields (0: held back). It backs
// the choice in resample.go: none of the linear-phase recipes is much
// cheaper, and only the cubic QQ is, at a quality we do not ship.
func BenchmarkResampleRecipes(b *testing.B) {
	in := voiceLike(3*22050, 22050)
	for _, rc := range []struct {
		name             string
		recipe           uint64
		minDFT, largeDFT uint
	}{
		{"ours-16bit-dft8", recipe16Bit, 8, 8},
		{"16bit-dft10-17", recipe16Bit, 10, 17},
		{"MQ-dft8", recipeMQ, 8, 8},
		{"LQ-dft8", recipeLQ, 8, 8},
		{"HQ-dft10-17", recipeHQ, 10, 17},
		{"QQ-cubic", recipeQQ, 8, 8},
	} {
		b.Run(rc.name, func(b *testing.B) {
			buf := make([]float32, 0, 8192)
			first := -1
			rt := startRealtime()
			for b.Loop() {
				r, err := newResampler(22050, 24000, cULong(rc.recipe), cUInt(rc.minDFT), cUInt(rc.largeDFT))
				if err != nil {
					b.Fatal(err)
				}
				for i := 0; i < len(in); i += 2205 {
					if buf, err = r.Process(buf[:0], in[i:min(i+2205, len(in))]); err != nil {
						b.Fatal(err)
					}
					if first < 0 {
						first = len(buf)
					}
				}
				buf, _ = r.Flush(buf[:0])
				r.Close()
			}
			rt.report(b, 3)
			b.ReportMetric(float64(first), "first-out")
		})
	}
}
