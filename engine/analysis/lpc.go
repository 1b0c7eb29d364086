package analysis

import (
	"math"
	"math/cmplx"
	"sort"
	"sync"
)

// LPC formant analysis: autocorrelation method with Levinson-Durbin
// recursion, then the roots of the prediction polynomial give the resonances
// (frequency from the root angle, bandwidth from its radius).
//
// The right order depends on the vocal tract, as Praat's formant ceiling
// does (5000 Hz for men, 5500 Hz for women): a long tract has more
// resonances below Nyquist, and too low an order merges F1/F2; a short tract
// has fewer, and too high an order splits formants with spurious poles.
// At 11025 Hz order 12 (6 resonances below 5.5 kHz) suits average and short
// tracts, order 14 long ones; Analyze runs both and picks by the result.
const (
	orderShort = 12
	orderLong  = 14
	// longTractScale: below this formant scale order 14 is the right model.
	// Both orders agree around this value on test material.
	longTractScale = 0.97
	lpcWindow      = 276 // 25 ms
	maxBW          = 600.0
	minFormF       = 90.0
)

var (
	hammingOnce sync.Once
	hamming     []float64
	preEmph     = math.Exp(-2 * math.Pi * 50 / analysisRate) // +6 dB/oct above 50 Hz
)

// formantMedians returns the medians of F1-F3 over the given frames with an
// LPC model of the given order.
func formantMedians(x []float64, frames []int, order int) [3]float64 {
	var fm [3][]float64
	for _, i := range frames {
		if fr, ok := frameFormants(x, i, order); ok {
			for k := range fm {
				fm[k] = append(fm[k], fr[k])
			}
		}
	}
	return [3]float64{median(fm[0]), median(fm[1]), median(fm[2])}
}

// scaleOf is the geometric mean ratio of formant medians to the neutral tube.
func scaleOf(m [3]float64) float64 {
	logSum := 0.0
	for k, v := range m {
		if v <= 0 {
			return 0
		}
		logSum += math.Log(v / neutralFormants[k])
	}
	return math.Exp(logSum / 3)
}

// frameFormants returns F1-F3 of frame i (same centre as its YIN window).
func frameFormants(x []float64, i, order int) ([3]float64, bool) {
	hammingOnce.Do(func() {
		hamming = make([]float64, lpcWindow)
		for j := range hamming {
			hamming[j] = 0.54 - 0.46*math.Cos(2*math.Pi*float64(j)/float64(lpcWindow-1))
		}
	})
	var out [3]float64
	start := i*hop + yinWindow/2 - lpcWindow/2
	if start < 1 || start+lpcWindow > len(x) {
		return out, false
	}
	var buf [lpcWindow]float64
	for j := range buf {
		buf[j] = (x[start+j] - preEmph*x[start+j-1]) * hamming[j]
	}
	var rbuf [orderLong + 1]float64
	r := rbuf[:order+1]
	for k := range r {
		var acc float64
		for j := k; j < lpcWindow; j++ {
			acc += buf[j] * buf[j-k]
		}
		r[k] = acc
	}
	if r[0] <= 0 {
		return out, false
	}
	r[0] *= 1 + 1e-9 // white-noise correction keeps the recursion stable
	a, ok := levinson(r)
	if !ok {
		return out, false
	}
	var fs []float64
	for _, z := range polyRoots(a) {
		if imag(z) <= 0 {
			continue
		}
		f := math.Atan2(imag(z), real(z)) * analysisRate / (2 * math.Pi)
		bw := -math.Log(cmplx.Abs(z)) * analysisRate / math.Pi
		if f > minFormF && f < analysisRate/2-100 && bw > 0 && bw < maxBW {
			fs = append(fs, f)
		}
	}
	if len(fs) < 3 {
		return out, false
	}
	sort.Float64s(fs)
	copy(out[:], fs[:3])
	return out, true
}

// levinson solves the normal equations for the predictor
// e[n] = x[n] + sum_{k=1..p} a[k] x[n-k] (a[0] = 1) by the Levinson-Durbin
// recursion; ok is false if the autocorrelation is not positive definite.
func levinson(r []float64) ([]float64, bool) {
	p := len(r) - 1
	a := make([]float64, p+1)
	tmp := make([]float64, p+1)
	a[0] = 1
	errp := r[0]
	for i := 1; i <= p; i++ {
		acc := r[i]
		for j := 1; j < i; j++ {
			acc += a[j] * r[i-j]
		}
		k := -acc / errp
		copy(tmp, a)
		for j := 1; j < i; j++ {
			a[j] = tmp[j] + k*tmp[i-j]
		}
		a[i] = k
		errp *= 1 - k*k
		if errp <= 0 {
			return nil, false
		}
	}
	return a, true
}

// polyRoots finds all roots of the monic polynomial
// z^p + a[1] z^(p-1) + ... + a[p] by Durand-Kerner (Weierstrass) iteration.
// LPC polynomials are minimum phase, so all roots lie inside the unit circle
// and the standard spiral start converges quickly.
func polyRoots(a []float64) []complex128 {
	p := len(a) - 1
	z := make([]complex128, p)
	seed := complex(0.4, 0.9)
	z[0] = seed
	for i := 1; i < p; i++ {
		z[i] = z[i-1] * seed
	}
	eval := func(x complex128) complex128 {
		v := complex(1, 0)
		for k := 1; k <= p; k++ {
			v = v*x + complex(a[k], 0)
		}
		return v
	}
	for iter := 0; iter < 200; iter++ {
		maxStep := 0.0
		for i := range z {
			den := complex(1, 0)
			for j := range z {
				if j != i {
					den *= z[i] - z[j]
				}
			}
			if den == 0 {
				den = complex(1e-12, 0)
			}
			step := eval(z[i]) / den
			z[i] -= step
			maxStep = math.Max(maxStep, cmplx.Abs(step))
		}
		if maxStep < 1e-9 {
			break
		}
	}
	return z
}
