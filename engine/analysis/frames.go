package analysis

import (
	"math"
	"sort"
)

// YIN parameters (de Cheveigné & Kawahara 2002). The integration window must
// cover the longest period searched (50 Hz = 221 samples at 11025 Hz).
const (
	yinWindow    = 331 // 30 ms
	yinThreshold = 0.15
	// maxAperiodicity: frames whose best CMNDF dip is above this are not
	// voiced. White noise stays near 1, voiced speech well below 0.25.
	maxAperiodicity = 0.25
	// gateBelowPeak: frames this far below the loud frames are ignored, so
	// breath and room noise in pauses cannot count as speech.
	gateBelowPeak = 40.0
	absoluteFloor = -70.0 // dBFS
	// activityMargin: speech activity is this far above the noise floor.
	activityMargin = 12.0
)

type frame struct {
	db     float64 // RMS level, dBFS
	f0     float64 // Hz, 0 if unvoiced
	aper   float64 // CMNDF dip (YIN aperiodicity)
	hnr    float64 // dB (Boersma 1993, from the normalized autocorrelation)
	voiced bool
}

var (
	tauMin = int(math.Floor(analysisRate / maxF0))
	tauMax = int(math.Ceil(analysisRate / minF0))
)

// analyzeFrames computes level and YIN pitch for every 10 ms hop.
func analyzeFrames(x []float64) []frame {
	span := yinWindow + tauMax + 1
	if len(x) < span {
		return nil
	}
	n := (len(x)-span)/hop + 1
	frames := make([]frame, n)
	levels := make([]float64, n)
	for i := range frames {
		s := x[i*hop : i*hop+yinWindow]
		var e float64
		for _, v := range s {
			e += v * v
		}
		frames[i].db = 10 * math.Log10(e/yinWindow+1e-20)
		levels[i] = frames[i].db
	}
	sort.Float64s(levels)
	gate := math.Max(percentile(levels, 99)-gateBelowPeak, absoluteFloor)
	d, cm := make([]float64, tauMax+2), make([]float64, tauMax+2)
	for i := range frames {
		f := &frames[i]
		if f.db < gate {
			continue
		}
		f.f0, f.aper, f.hnr = yin(x[i*hop:i*hop+span], d, cm)
		f.voiced = f.f0 > 0 && f.aper < maxAperiodicity
	}
	return frames
}

// yin estimates the period of s[0:yinWindow] against lags up to tauMax using
// the cumulative-mean-normalized difference function (CMNDF), the absolute
// threshold, and parabolic interpolation of the chosen dip. d, cm are scratch.
func yin(s, d, cm []float64) (f0, aper, hnr float64) {
	w := yinWindow
	// Difference function d(tau) = sum (x_j - x_{j+tau})^2.
	for tau := 1; tau <= tauMax+1; tau++ {
		var acc float64
		a, b := s[:w], s[tau:tau+w]
		for j := range a {
			t := a[j] - b[j]
			acc += t * t
		}
		d[tau] = acc
	}
	// Cumulative-mean-normalized difference d'(tau) = d(tau)*tau / sum d.
	var run float64
	for tau := 1; tau <= tauMax+1; tau++ {
		run += d[tau]
		if run > 0 {
			cm[tau] = d[tau] * float64(tau) / run
		} else {
			cm[tau] = 1
		}
	}
	best := -1
	for tau := tauMin; tau <= tauMax; tau++ {
		if cm[tau] < yinThreshold {
			for tau+1 <= tauMax && cm[tau+1] < cm[tau] {
				tau++
			}
			best = tau
			break
		}
	}
	if best < 0 { // no dip under the threshold: take the global minimum
		best = tauMin
		for tau := tauMin + 1; tau <= tauMax; tau++ {
			if cm[tau] < cm[best] {
				best = tau
			}
		}
	}
	aper = cm[best]
	t := float64(best)
	if best > 1 && best < tauMax+1 {
		a, b, c := cm[best-1], cm[best], cm[best+1]
		if den := a - 2*b + c; den > 0 {
			t += 0.5 * (a - c) / den
		}
	}
	f0 = analysisRate / t
	if f0 < minF0 || f0 > maxF0 {
		return 0, aper, 0
	}
	// Normalized autocorrelation at the period from d(T) = e0 + eT - 2r(T).
	var e0, eT float64
	for j := 0; j < w; j++ {
		e0 += s[j] * s[j]
		eT += s[j+best] * s[j+best]
	}
	r := 1 - d[best]/(e0+eT+1e-20)
	r = clamp(r, 1e-4, 1-1e-4)
	hnr = 10 * math.Log10(r/(1-r))
	return f0, aper, hnr
}

type segment struct{ start, end int } // frame indices, end exclusive

func (s segment) seconds() float64 { return float64(s.end-s.start) * hop / analysisRate }

// speechSegments is the VAD. Frames clearly above the noise floor form
// active stretches; a stretch is speech only if it holds a voiced run of at
// least 30 ms (periodicity, not energy alone, so noise never counts).
// Speech stretches separated by pauses up to MaxPause are joined into one
// continuous run, as pauses between words and sentences belong to speaking.
func speechSegments(frames []frame) []segment {
	const minVoiced = 3
	if len(frames) == 0 {
		return nil
	}
	levels := make([]float64, len(frames))
	for i, f := range frames {
		levels[i] = f.db
	}
	sort.Float64s(levels)
	// Noise floor from the quietest frames; the activity threshold sits a
	// margin above it, but never so high that normal speech levels drop out
	// in a clip without pauses.
	floor := math.Max(percentile(levels, 5), absoluteFloor)
	thr := math.Min(floor+activityMargin, percentile(levels, 99)-30)
	maxGap := int(math.Round(MaxPause * analysisRate / hop))
	var segs []segment
	for i := 0; i < len(frames); {
		if frames[i].db < thr {
			i++
			continue
		}
		j, run, best := i, 0, 0
		for ; j < len(frames) && frames[j].db >= thr; j++ {
			if frames[j].voiced {
				run++
				best = max(best, run)
			} else {
				run = 0
			}
		}
		if best >= minVoiced {
			if n := len(segs); n > 0 && i-segs[n-1].end <= maxGap {
				segs[n-1].end = j
			} else {
				segs = append(segs, segment{i, j})
			}
		}
		i = j
	}
	return segs
}

// syllableRate counts syllable nuclei after de Jong & Wempe (2009):
// intensity peaks above the median speech level that are at least weakly
// periodic, each separated from the previous one by a dip. Their 2 dB dip
// merges syllables at fast rates on smooth synthetic speech; 1 dB keeps the
// count monotonic up to 350 wpm.
func syllableRate(frames []frame, segs []segment, speech float64) float64 {
	if speech <= 0 {
		return 0
	}
	var lv []float64
	for _, s := range segs {
		for i := s.start; i < s.end; i++ {
			lv = append(lv, frames[i].db)
		}
	}
	thr := median(lv)
	const dip = 1.0
	count := 0
	for _, s := range segs {
		lastPeak := -1
		for i := s.start + 1; i < s.end-1; i++ {
			db := frames[i].db
			if frames[i].f0 == 0 || frames[i].aper > 0.45 || db < thr || db < frames[i-1].db || db <= frames[i+1].db {
				continue
			}
			if lastPeak < 0 {
				lastPeak = i
				count++
				continue
			}
			lo := db
			for k := lastPeak; k <= i; k++ {
				lo = math.Min(lo, frames[k].db)
			}
			if math.Min(db, frames[lastPeak].db)-lo >= dip {
				lastPeak = i
				count++
			} else if db > frames[lastPeak].db {
				lastPeak = i // same nucleus, keep the higher peak
			}
		}
	}
	return float64(count) / speech
}
