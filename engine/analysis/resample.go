package analysis

import (
	"math"
	"sync"
)

// Band-limited resampling (Smith's bandlimited interpolation): each output
// sample is a windowed-sinc weighted sum of the inputs around its position.
// The kernel is tabulated once at kernelRes points per zero crossing and
// linearly interpolated, so no sin/cos is evaluated per tap.
const (
	zeroCrossings = 8
	kernelRes     = 256
)

var (
	kernelOnce sync.Once
	kernel     []float64 // windowed sinc sampled at t = i/kernelRes, t >= 0
)

func initKernel() {
	n := zeroCrossings*kernelRes + 2
	kernel = make([]float64, n)
	for i := range kernel {
		t := float64(i) / kernelRes
		if t >= zeroCrossings {
			continue
		}
		s := 1.0
		if t > 0 {
			s = math.Sin(math.Pi*t) / (math.Pi * t)
		}
		// Blackman window over [-zeroCrossings, zeroCrossings].
		w := 0.42 + 0.5*math.Cos(math.Pi*t/zeroCrossings) + 0.08*math.Cos(2*math.Pi*t/zeroCrossings)
		kernel[i] = s * w
	}
}

func kernelAt(t float64) float64 {
	if t < 0 {
		t = -t
	}
	p := t * kernelRes
	i := int(p)
	if i >= len(kernel)-1 {
		return 0
	}
	f := p - float64(i)
	return kernel[i]*(1-f) + kernel[i+1]*f
}

// resample converts in (at rate from) to rate to as float64. When
// downsampling the kernel is stretched so its cutoff is 0.95 of the new
// Nyquist frequency, which is the anti-aliasing filter.
func resample(in []float32, from, to int) []float64 {
	if from == to {
		out := make([]float64, len(in))
		for i, v := range in {
			out[i] = float64(v)
		}
		return out
	}
	kernelOnce.Do(initKernel)
	step := float64(from) / float64(to) // input samples per output sample
	scale := 0.95                       // cutoff relative to the lower Nyquist
	if step > 1 {
		scale /= step
	}
	half := float64(zeroCrossings) / scale // kernel half-width in input samples
	n := int(float64(len(in)) / step)
	out := make([]float64, n)
	for j := range out {
		t := float64(j) * step
		lo := int(math.Ceil(t - half))
		hi := int(math.Floor(t + half))
		if lo < 0 {
			lo = 0
		}
		if hi > len(in)-1 {
			hi = len(in) - 1
		}
		var acc float64
		for k := lo; k <= hi; k++ {
			acc += float64(in[k]) * kernelAt((t-float64(k))*scale)
		}
		out[j] = acc * scale
	}
	return out
}
