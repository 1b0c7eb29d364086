package analysis

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Suggestion is the espeak-ng parameter set that renders a measured speaker:
// a base voice and variant, plus pitch, formant scaling, rate and
// breathiness on top of it. It is a plain struct so this package stays
// independent of the engine that consumes it.
type Suggestion struct {
	Language string // espeak language voice, e.g. "en", "de"
	Variant  string // espeak variant file in voices/!v, e.g. "m3", "f2"
	Gender   string // "male" or "female"
	// Pitch is espeak's pitch parameter 0-99 (-p) that puts the median F0
	// on F0 with this variant (from the measured table below).
	Pitch int
	// PitchRange is espeak's range parameter 0-99 (50 = the variant's own
	// intonation range), scaled by the speaker's P90/P10 spread.
	PitchRange int
	F0         float64 // target median F0, Hz (for engines that set Hz directly)
	// FormantScale multiplies the variant's formant frequencies (the freq
	// percentages of its "formant N freq height width" lines); 1 = as is.
	FormantScale float64
	Rate         int     // words per minute (-s)
	Breathiness  float64 // 0-1 aspiration to add over the variant's own
}

// VoiceName is the espeak voice spec, "<language>+<variant>".
func (s Suggestion) VoiceName() string { return s.Language + "+" + s.Variant }

// variantCal is one espeak-ng variant as Analyze measured it on the English
// calibration text at 175 wpm (TestCalibrate re-measures and prints these).
type variantCal struct {
	name, gender string
	scale        float64                   // FormantScale at -p 50
	spread       float64                   // F0P90/F0P10 at -p 50
	breath       float64                   // Breathiness at -p 50
	f0           [len(pitchPoints)]float64 // F0 median at each pitchPoints value
}

// pitchPoints are the -p values the calibration measures; espeak's mapping
// from -p to Hz is piecewise linear in between to good accuracy.
var pitchPoints = [...]int{0, 25, 50, 75, 99}

var variantNames = []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "f1", "f2", "f3", "f4", "f5"}

// variants: measured with espeak-ng 1.51 (TestCalibrate).
var variants = []variantCal{
	{"m1", "male", 0.888, 1.226, 0.64, [5]float64{60.9, 73.9, 92.9, 120.0, 156.7}},
	{"m2", "male", 0.949, 1.172, 0.60, [5]float64{60.9, 77.8, 100.4, 132.7, 176.6}},
	{"m3", "male", 0.889, 1.246, 0.58, [5]float64{69.8, 84.0, 104.2, 133.0, 172.3}},
	{"m4", "male", 0.945, 1.254, 0.57, [5]float64{63.9, 75.7, 93.8, 118.2, 151.5}},
	{"m5", "male", 0.937, 1.202, 0.56, [5]float64{68.7, 83.0, 103.2, 131.9, 171.3}},
	{"m6", "male", 0.943, 1.222, 0.54, [5]float64{65.1, 79.3, 100.5, 130.6, 171.0}},
	{"m7", "male", 0.928, 1.287, 0.52, [5]float64{74.6, 86.9, 105.8, 132.4, 169.6}},
	{"f1", "female", 1.070, 1.212, 0.56, [5]float64{115.1, 141.4, 178.5, 232.4, 304.9}},
	{"f2", "female", 1.042, 1.260, 0.42, [5]float64{129.2, 157.0, 193.8, 248.7, 322.4}},
	{"f3", "female", 1.095, 1.285, 0.53, [5]float64{146.3, 172.7, 210.3, 263.1, 335.0}},
	{"f4", "female", 1.095, 1.216, 0.44, [5]float64{113.2, 140.5, 178.0, 233.2, 306.6}},
	{"f5", "female", 1.049, 1.222, 0.47, [5]float64{130.3, 161.0, 204.0, 265.8, 348.9}},
}

// ratePoints are the -s values measured; rateTable maps them (en+m3, -p 50)
// to the syllable rate Analyze reports on the calibration text.
var ratePoints = []int{80, 120, 175, 250, 350}

var rateTable = [][2]float64{
	{80, 2.692}, {120, 3.387}, {175, 4.601}, {250, 6.294}, {350, 7.627},
}

// languages: espeak's phoneme inventories shift the measured formant scale
// and the syllables per second at a given wpm relative to the English
// calibration (TestCalibrate, m3 and f2 at -p 50, 175 wpm). A real speaker of
// the language shows the same vowel-inventory shift, so the base variant's
// scale is compared in the clip's language. Other languages use English.
var languages = map[string]struct{ scale, rate float64 }{
	"de": {0.998, 1.081},
	"fr": {1.041, 1.326},
	"hi": {1.061, 1.125},
}

// Suggest chooses the espeak parameters for a measured speaker: the variant
// of the speaker's gender with the closest formant scale (ties broken by
// whether its pitch table can reach the speaker's F0), then the formant
// factor, pitch, range, rate and breathiness relative to that variant.
func Suggest(r Report, language string) Suggestion {
	lang := strings.ToLower(strings.SplitN(strings.ReplaceAll(language, "_", "-"), "-", 2)[0])
	if lang == "" {
		lang = "en"
	}
	gender := r.Gender
	if gender != "female" {
		gender = "male"
	}
	langCal, ok := languages[lang]
	if !ok {
		langCal.scale, langCal.rate = 1, 1
	}
	best, bestCost := variants[0], math.Inf(1)
	for _, v := range variants {
		if v.gender != gender {
			continue
		}
		cost := 0.0
		if r.FormantScale > 0 {
			cost += math.Abs(math.Log(r.FormantScale / (v.scale * langCal.scale)))
		}
		if r.F0Median > 0 { // F0 outside the reachable -p range costs more
			lo, hi := v.f0[0], v.f0[len(v.f0)-1]
			if r.F0Median < lo {
				cost += 2 * math.Log(lo/r.F0Median)
			} else if r.F0Median > hi {
				cost += 2 * math.Log(r.F0Median/hi)
			}
		}
		if cost < bestCost {
			best, bestCost = v, cost
		}
	}
	s := Suggestion{Language: lang, Variant: best.name, Gender: gender, Pitch: 50, PitchRange: 50,
		F0: r.F0Median, FormantScale: 1, Rate: 175}
	if r.FormantScale > 0 {
		s.FormantScale = clamp(r.FormantScale/(best.scale*langCal.scale), 0.6, 1.6)
	}
	if r.F0Median > 0 {
		s.Pitch = int(math.Round(clamp(invert(pitchTable(best), r.F0Median), 0, 99)))
	}
	if r.F0P10 > 0 && r.F0P90 > r.F0P10 && best.spread > 1 {
		s.PitchRange = int(math.Round(clamp(50*math.Log(r.F0P90/r.F0P10)/math.Log(best.spread), 0, 99)))
	}
	if r.SpeakingRate > 0 {
		sr := r.SpeakingRate / langCal.rate
		s.Rate = int(math.Round(clamp(invert(rateTable, sr), 80, 450)))
	}
	if best.breath < 1 {
		s.Breathiness = clamp((r.Breathiness-best.breath)/(1-best.breath), 0, 1)
	}
	return s
}

func pitchTable(v variantCal) [][2]float64 {
	t := make([][2]float64, len(pitchPoints))
	for k, p := range pitchPoints {
		t[k] = [2]float64{float64(p), v.f0[k]}
	}
	return t
}

// invert maps y back to x on a monotonically increasing table of (x, y)
// points, interpolating linearly and extrapolating from the end segments.
func invert(t [][2]float64, y float64) float64 {
	if len(t) < 2 {
		return 0
	}
	k := 1
	for k < len(t)-1 && y > t[k][1] {
		k++
	}
	x0, y0, x1, y1 := t[k-1][0], t[k-1][1], t[k][0], t[k][1]
	if y1 == y0 {
		return x0
	}
	return x0 + (y-y0)*(x1-x0)/(y1-y0)
}

// VariantFile rewrites an espeak-ng variant file (voices/!v/<variant>) for
// a suggestion: every "formant N freq height width" line gets its freq
// percentage multiplied by FormantScale, and Breathiness adds a "breath"
// line (aspiration on formants 1-8, levels 0-6 as in espeak's breathy
// variants). The engine installs the result as its own variant.
func VariantFile(base string, s Suggestion) string {
	var out []string
	for _, line := range strings.Split(base, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "formant":
			if pct, err := strconv.ParseFloat(f[2], 64); err == nil {
				f[2] = strconv.Itoa(int(math.Round(pct * s.FormantScale)))
				line = strings.Join(f, " ")
			}
		case len(f) > 0 && f[0] == "breath" && s.Breathiness > 0.05:
			continue // replaced below
		}
		out = append(out, line)
	}
	if s.Breathiness > 0.05 {
		lv := int(math.Round(6 * s.Breathiness))
		out = append(out, fmt.Sprintf("breath 0 %d %d %d %d %d %d %d", lv, lv, lv, lv, lv, lv, lv))
	}
	return strings.Join(out, "\n")
}
