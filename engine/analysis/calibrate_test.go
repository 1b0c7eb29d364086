package analysis

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestCalibrate measures espeak-ng's variants once and prints the tables
// encoded in profile.go (pitch 0-99 -> F0, formant scale, rate). Run with
// ANALYSIS_CALIBRATE=1 after an espeak-ng upgrade and paste the output.
func TestCalibrate(t *testing.T) {
	if os.Getenv("ANALYSIS_CALIBRATE") == "" {
		t.Skip("set ANALYSIS_CALIBRATE=1 to re-measure espeak-ng")
	}
	var b strings.Builder
	for _, v := range variantNames {
		if os.Getenv("ANALYSIS_CALIBRATE") == "quick" {
			break
		}
		var f0 [len(pitchPoints)]float64
		var r50 Report
		for k, p := range pitchPoints {
			r := analyzeFile(t, speak(t, fmt.Sprintf("cal-%s-%d", v, p), "en+"+v, p, 175, texts["en"]))
			f0[k] = r.F0Median
			if p == 50 {
				r50 = r
			}
		}
		fmt.Fprintf(&b, "\t{%q, %q, %.3f, %.3f, %.2f, [%d]float64{", v, r50.Gender, r50.FormantScale, r50.F0P90/r50.F0P10, r50.Breathiness, len(pitchPoints))
		for k, f := range f0 {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%.1f", f)
		}
		b.WriteString("}},\n")
	}
	b.WriteString("language formant scale and syllable rate relative to English (m3, f2 at -p 50):\n")
	for _, lang := range []string{"de", "fr", "hi"} {
		var fs, sr float64
		for _, v := range []string{"m3", "f2"} {
			en := analyzeFile(t, speak(t, "cal-en-"+v, "en+"+v, 50, 175, texts["en"]))
			r := analyzeFile(t, speak(t, "cal-"+lang+"-"+v, lang+"+"+v, 50, 175, texts[lang]))
			fs += FormantScale(r, en) / 2
			sr += r.SpeakingRate / en.SpeakingRate / 2
		}
		fmt.Fprintf(&b, "\t%q: {%.3f, %.3f},\n", lang, fs, sr)
	}
	b.WriteString("rate:\n")
	for _, s := range ratePoints {
		r := analyzeFile(t, speak(t, fmt.Sprintf("cal-rate-%d", s), "en+m3", 50, s, texts["en"]))
		fmt.Fprintf(&b, "\t{%d, %.3f},\n", s, r.SpeakingRate)
	}
	t.Log("\n" + b.String())
}
