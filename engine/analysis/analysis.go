// Package analysis measures a speaker from a reference clip: voice activity,
// fundamental frequency, formant scaling (vocal-tract length), speaking rate
// and breathiness. It is pure Go DSP, used by the embedded engine's Enroll to
// derive a parametric voice profile (see Suggest) that matches the speaker's
// pitch, formant scale, rate and voice quality. Timbre detail beyond that is
// out of reach of a formant synthesizer; a neural engine would plug in behind
// the engine interface instead.
//
// Pipeline: resample to 11025 Hz (enough for F1-F3 and a Praat-like
// "5 formants below 5.5 kHz" LPC setting) -> 10 ms frames -> YIN pitch and
// aperiodicity per frame -> voicing-based VAD with pause hangover -> LPC
// formants on voiced frames -> syllable nuclei from intensity peaks.
package analysis

import (
	"fmt"
	"math"
	"sort"

	"voicesvc/engine"
)

// MinContinuousSpeech is the shortest continuous speech run (seconds) a clip
// must contain to be usable for cloning.
const MinContinuousSpeech = 6.0

// MaxPause is the longest gap (seconds) between voiced stretches that still
// counts as the same continuous run: pauses between words and sentences are
// part of speaking, a longer silence breaks the run.
const MaxPause = 0.7

// Neutral formants of a 17.5 cm uniform tube closed at the glottis
// (F_n = (2n-1)c/4L, c = 350 m/s): the fixed reference for Report.FormantScale.
var neutralFormants = [3]float64{500, 1500, 2500}

// ErrNotEnoughSpeech is the class of "clip has too little speech"; it wraps
// engine.ErrClipUnusable so callers can map it to clip_unusable.
var ErrNotEnoughSpeech = fmt.Errorf("%w: not enough continuous speech", engine.ErrClipUnusable)

// SpeechError reports how much speech was found in an unusable clip.
type SpeechError struct {
	Continuous float64 // longest continuous speech run, seconds
	Total      float64 // all speech found, seconds
	Need       float64 // required continuous speech, seconds
}

func (e *SpeechError) Error() string {
	return fmt.Sprintf("clip unusable: found %.1f s of continuous speech (%.1f s in total); need at least %g s",
		e.Continuous, e.Total, e.Need)
}

// Unwrap makes errors.Is(err, ErrNotEnoughSpeech) and
// errors.Is(err, engine.ErrClipUnusable) true.
func (e *SpeechError) Unwrap() error { return ErrNotEnoughSpeech }

// Report is what Analyze measured. Frequencies are in Hz, durations in
// seconds.
type Report struct {
	Duration         float64 // clip length
	SpeechSeconds    float64 // total speech (voiced runs joined across pauses)
	LongestSpeechRun float64 // longest continuous run

	F0Median, F0P10, F0P90 float64

	// FormantScale is the vocal-tract-length ratio estimate: the geometric
	// mean of F1-F3 medians over those of a 17.5 cm neutral tube. A shorter
	// tract gives a larger value. Compare two reports with FormantScale().
	FormantScale float64
	F1, F2, F3   float64 // formant medians over voiced frames

	SpeakingRate float64 // syllable nuclei per second of speech
	// HNR is the 80th percentile of per-frame harmonics-to-noise ratio
	// (dB): the steady vowel cores, not transitions, carry voice quality.
	HNR         float64
	Breathiness float64 // 0 (clear, HNR >= breathyHNR0) .. 1 (HNR <= breathyHNR1)
	Gender      string  // "male" or "female", from F0 and formant scale

	VoicedFrames int // frames used for F0/formant statistics
}

// FormantScale is the formant-frequency ratio of r relative to reference
// (1.1 means r's formants are 10% higher, i.e. a ~10% shorter vocal tract).
func FormantScale(r, reference Report) float64 {
	if reference.FormantScale <= 0 {
		return 0
	}
	return r.FormantScale / reference.FormantScale
}

const (
	analysisRate = 11025
	hop          = 110 // ~10 ms at 11025 Hz
	minF0        = 50.0
	maxF0        = 500.0
)

// Analyze measures a mono clip. On a clip without enough continuous speech
// it returns a *SpeechError (errors.Is ErrNotEnoughSpeech and
// engine.ErrClipUnusable) together with the partial report.
func Analyze(samples []float32, rate int) (Report, error) {
	if rate < 4000 || rate > 768000 {
		return Report{}, fmt.Errorf("%w: unsupported sample rate %d", engine.ErrClipUnusable, rate)
	}
	x := resample(samples, rate, analysisRate)
	for i, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			x[i] = 0
		}
	}
	rep := Report{Duration: float64(len(samples)) / float64(rate)}
	frames := analyzeFrames(x)
	segs := speechSegments(frames)
	for _, s := range segs {
		d := s.seconds()
		rep.SpeechSeconds += d
		rep.LongestSpeechRun = math.Max(rep.LongestSpeechRun, d)
	}
	if rep.LongestSpeechRun < MinContinuousSpeech {
		return rep, &SpeechError{Continuous: round1(rep.LongestSpeechRun), Total: round1(rep.SpeechSeconds), Need: MinContinuousSpeech}
	}

	var f0s, hnrs []float64
	var voiced []int
	for _, s := range segs {
		for i := s.start; i < s.end; i++ {
			if f := &frames[i]; f.voiced {
				f0s = append(f0s, f.f0)
				hnrs = append(hnrs, f.hnr)
				voiced = append(voiced, i)
			}
		}
	}
	rep.VoicedFrames = len(f0s)
	sort.Float64s(f0s)
	rep.F0Median = percentile(f0s, 50)
	rep.F0P10 = percentile(f0s, 10)
	rep.F0P90 = percentile(f0s, 90)
	sort.Float64s(hnrs)
	rep.HNR = percentile(hnrs, 80)
	rep.Breathiness = clamp((breathyHNR0-rep.HNR)/(breathyHNR0-breathyHNR1), 0, 1)

	// Run both LPC orders; each is biased only where it is the wrong model
	// (order 12 high on long tracts, order 14 low on short ones), so their
	// geometric mean is a safe guide to which tract length we have.
	fmLong, fmShort := formantMedians(x, voiced, orderLong), formantMedians(x, voiced, orderShort)
	fm := fmShort
	if math.Sqrt(scaleOf(fmLong)*scaleOf(fmShort)) < longTractScale {
		fm = fmLong
	}
	rep.F1, rep.F2, rep.F3 = fm[0], fm[1], fm[2]
	rep.FormantScale = scaleOf(fm)
	rep.SpeakingRate = syllableRate(frames, segs, rep.SpeechSeconds)
	rep.Gender = guessGender(rep.F0Median, rep.FormantScale)
	return rep, nil
}

// guessGender combines F0 (adult male ~85-155 Hz, female ~165-255 Hz) with
// formant scale (female tracts ~15% shorter): each contributes a log-distance
// from its boundary, so a low-pitched voice with a short tract or a
// high-pitched one with a long tract is decided by the stronger cue. The
// formant cue is weighted less: its absolute value shifts with the language
// and text (vowel inventory), F0 does not.
func guessGender(f0, scale float64) string {
	if f0 <= 0 {
		return ""
	}
	s := math.Log(f0/160) / math.Log(1.3)
	if scale > 0 {
		s += math.Log(scale/genderScaleBoundary) / math.Log(1.2)
	}
	if s > 0 {
		return "female"
	}
	return "male"
}

// genderScaleBoundary sits between the formant scales measured on espeak's
// male and female variants (see calibration in profile.go).
const genderScaleBoundary = 1.0

// Breathiness maps HNR linearly: aspiration noise lowers HNR (Boersma 1993;
// breathy phonation typically measures 5-10 dB lower than modal voice).
const (
	breathyHNR0 = 24.0
	breathyHNR1 = 4.0
)

func round1(v float64) float64 { return math.Floor(v*10) / 10 }

func clamp(v, lo, hi float64) float64 { return math.Max(lo, math.Min(hi, v)) }

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return percentile(s, 50)
}

// percentile of sorted data with linear interpolation between ranks.
func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	pos := p / 100 * float64(len(sorted)-1)
	i := int(pos)
	if i >= len(sorted)-1 {
		return sorted[len(sorted)-1]
	}
	fr := pos - float64(i)
	return sorted[i]*(1-fr) + sorted[i+1]*fr
}
