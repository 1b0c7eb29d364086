package bench

import (
	"math"
	"math/rand/v2"
	"sort"
	"time"
)

// Percentile returns the q-quantile (0 <= q <= 1) of sorted using linear
// interpolation between closest ranks (type 7). sorted must be ascending.
// It returns NaN for an empty slice so that "no data" is never mistaken for 0.
func Percentile(sorted []float64, q float64) float64 {
	n := len(sorted)
	if n == 0 {
		return math.NaN()
	}
	if q <= 0 {
		return sorted[0]
	}
	if q >= 1 {
		return sorted[n-1]
	}
	h := float64(n-1) * q
	lo := int(math.Floor(h))
	if lo+1 >= n {
		return sorted[n-1]
	}
	return sorted[lo] + (h-float64(lo))*(sorted[lo+1]-sorted[lo])
}

// Dist summarises a latency distribution in milliseconds.
type Dist struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Summarize sorts xs in place and returns its distribution. Empty input gives
// N=0 with zero fields (JSON cannot carry NaN).
func Summarize(xs []float64) Dist {
	if len(xs) == 0 {
		return Dist{}
	}
	sort.Float64s(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return Dist{
		N:    len(xs),
		Mean: sum / float64(len(xs)),
		P50:  Percentile(xs, 0.50),
		P90:  Percentile(xs, 0.90),
		P99:  Percentile(xs, 0.99),
		Max:  xs[len(xs)-1],
	}
}

// Ms converts a duration to float milliseconds, the unit of every figure.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RTF is the real-time factor wall/audio; 0 when there is no audio, because an
// infinite factor would poison JSON and averages alike.
func RTF(wall time.Duration, audioSeconds float64) float64 {
	if audioSeconds <= 0 {
		return 0
	}
	return wall.Seconds() / audioSeconds
}

// Rate is count per second of elapsed time; 0 for a zero window.
func Rate(count float64, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return count / elapsed.Seconds()
}

// reservoir keeps at most cap values with Algorithm R so that memory stays
// bounded on long runs with many chunks, while percentiles stay unbiased. Up to
// cap values it is exact. It also tracks the exact maximum, which sampling would
// lose. Not safe for concurrent use.
type reservoir struct {
	cap  int
	seen int
	max  float64
	xs   []float64
	rng  *rand.Rand
}

func newReservoir(capacity int) *reservoir {
	// A fixed seed keeps two runs over the same timings comparable.
	return &reservoir{cap: capacity, rng: rand.New(rand.NewPCG(1, 2))}
}

func (r *reservoir) add(x float64) {
	r.seen++
	if x > r.max || r.seen == 1 {
		r.max = x
	}
	if len(r.xs) < r.cap {
		r.xs = append(r.xs, x)
		return
	}
	if j := r.rng.IntN(r.seen); j < r.cap {
		r.xs[j] = x
	}
}

// dist summarises the kept values, with the exact max and count.
func (r *reservoir) dist() Dist {
	d := Summarize(r.xs)
	if r.seen > 0 {
		d.N = r.seen
		d.Max = r.max
	}
	return d
}
