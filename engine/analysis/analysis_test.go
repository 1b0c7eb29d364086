package analysis

import (
	"errors"
	"math"
	"strings"
	"syscall"
	"testing"

	"voicesvc/engine"
)

// speakers are the reference voices for the known-relationship tests: both
// genders, low and high pitch, four languages.
var speakers = []struct {
	name, lang, voice string
	pitch             int
}{
	{"en-m1-low", "en", "en+m1", 30},
	{"en-m3", "en", "en+m3", 50},
	{"en-f2-high", "en", "en+f2", 70},
	{"en-f4", "en", "en+f4", 45},
	{"de-m7", "de", "de+m7", 55},
	{"fr-f1", "fr", "fr+f1", 50},
}

func refClip(t testing.TB, i int) string {
	s := speakers[i]
	return speak(t, "ref-"+s.name, s.voice, s.pitch, 175, texts[s.lang])
}

// TestKnownTransforms: sox "pitch" shifts F0 and formants by the same known
// ratio; "speed" scales F0, formants and rate together. Analyze must recover
// the ratios: F0 within 5%, formant scale within 10%.
func TestKnownTransforms(t *testing.T) {
	needTools(t)
	cases := []struct {
		effect []string
		ratio  float64
	}{
		{[]string{"pitch", "300"}, math.Pow(2, 300.0/1200)},
		{[]string{"pitch", "-200"}, math.Pow(2, -200.0/1200)},
		{[]string{"speed", "1.1"}, 1.1},
	}
	for i, sp := range speakers {
		base := analyzeFile(t, refClip(t, i))
		for _, c := range cases {
			r := analyzeFile(t, soxed(t, "tr-"+sp.name+"-"+strings.Join(c.effect, ""), refClip(t, i), c.effect...))
			f0r, fsr := r.F0Median/base.F0Median, FormantScale(r, base)
			t.Logf("%-10s %-12s want %.3f  F0 ratio %.3f  formant ratio %.3f  rate ratio %.2f",
				sp.name, strings.Join(c.effect, " "), c.ratio, f0r, fsr, r.SpeakingRate/base.SpeakingRate)
			if math.Abs(f0r/c.ratio-1) > 0.05 {
				t.Errorf("%s %v: F0 ratio %.3f, want %.3f ±5%%", sp.name, c.effect, f0r, c.ratio)
			}
			if math.Abs(fsr/c.ratio-1) > 0.10 {
				t.Errorf("%s %v: formant ratio %.3f, want %.3f ±10%%", sp.name, c.effect, fsr, c.ratio)
			}
		}
	}
}

// TestPitchOrdering: espeak -p moves F0 but not the vocal tract.
func TestPitchOrdering(t *testing.T) {
	needTools(t)
	for _, v := range []string{"en+m3", "en+f2"} {
		lo := analyzeFile(t, speak(t, "ord-"+v+"-30", v, 30, 175, texts["en"]))
		hi := analyzeFile(t, speak(t, "ord-"+v+"-70", v, 70, 175, texts["en"]))
		t.Logf("%s: -p 30 F0 %.1f, -p 70 F0 %.1f, formant ratio %.3f", v, lo.F0Median, hi.F0Median, FormantScale(hi, lo))
		if !(hi.F0Median > lo.F0Median*1.15) || !(hi.F0P10 > lo.F0P10) || !(hi.F0P90 > lo.F0P90) {
			t.Errorf("%s: F0 not ordered: p30 %+v, p70 %+v", v, lo, hi)
		}
		if fr := FormantScale(hi, lo); math.Abs(fr-1) > 0.08 {
			t.Errorf("%s: pitch changed the formant scale by %.3f", v, fr)
		}
	}
}

func TestGender(t *testing.T) {
	needTools(t)
	for i, sp := range speakers {
		want := "male"
		if strings.Contains(sp.voice, "+f") {
			want = "female"
		}
		if r := analyzeFile(t, refClip(t, i)); r.Gender != want {
			t.Errorf("%s: gender %q, want %q (F0 %.0f, scale %.3f)", sp.name, r.Gender, want, r.F0Median, r.FormantScale)
		}
	}
}

func TestVAD(t *testing.T) {
	needTools(t)
	short := speak(t, "vad-3s", "en+m3", 50, 175, "The lighthouse keeper counted every boat from the sea.")
	cases := []struct {
		name  string
		path  string
		ok    bool
		found string // expected "found X s" prefix when failing
	}{
		{"3 s clip", short, false, "found 2."},
		{"10 s clip", speak(t, "vad-10s", "en+m3", 50, 175, strings.SplitN(texts["en"], ". ", 3)[0]+". "+strings.SplitN(texts["en"], ". ", 3)[1]+"."), true, ""},
		{"silence", soxed(t, "vad-silence", short, "pad", "0", "10", "vol", "0"), false, "found 0.0"},
		{"white noise", clip(t, "vad-noise", func(out string) error {
			return run("sox", "-n", "-r", "22050", "-b", "16", out, "synth", "12", "whitenoise", "vol", "0.3")
		}), false, "found 0.0"},
		{"pink noise", clip(t, "vad-pink", func(out string) error {
			return run("sox", "-n", "-r", "22050", "-b", "16", out, "synth", "12", "pinknoise", "vol", "0.3")
		}), false, "found 0.0"},
		{"speech + noise 20 dB", clip(t, "vad-noisy", func(out string) error {
			return run("sox", "-m", refClip(t, 1), "-v", "0.03", clipNoise(t), out, "trim", "0", "12")
		}), true, ""},
	}
	for _, c := range cases {
		s, rate := readWAV(t, c.path)
		r, err := Analyze(s, rate)
		t.Logf("%-22s dur %.1f s  speech %.1f s  longest %.1f s  err %v", c.name, r.Duration, r.SpeechSeconds, r.LongestSpeechRun, err)
		if c.ok {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if !errors.Is(err, engine.ErrClipUnusable) || !errors.Is(err, ErrNotEnoughSpeech) || !isUnusable(err) {
			t.Errorf("%s: err %v, want clip unusable", c.name, err)
		} else if !strings.Contains(err.Error(), c.found) || !strings.Contains(err.Error(), "need at least 6 s") {
			t.Errorf("%s: message %q, want it to contain %q", c.name, err, c.found)
		}
	}
}

func clipNoise(t testing.TB) string {
	return clip(t, "noise-src", func(out string) error {
		return run("sox", "-n", "-r", "22050", "-b", "16", out, "synth", "16", "whitenoise")
	})
}

// TestPauseHangover: a pause shorter than MaxPause keeps the run continuous;
// a longer one splits it.
func TestPauseHangover(t *testing.T) {
	needTools(t)
	a := speak(t, "pause-a", "en+f2", 50, 175, "The old lighthouse keeper walked along the shore every morning, counting all the boats.")
	one := analyzeOrErr(t, a)
	for _, c := range []struct {
		gap  float64
		cont bool
	}{{0.4, true}, {1.5, false}} {
		s, rate := readWAV(t, a)
		s = trimSilence(s) // espeak pads its output; the gap must be exact
		joined := append(append(append([]float32{}, s...), make([]float32, int(c.gap*float64(rate)))...), s...)
		r, _ := Analyze(joined, rate)
		t.Logf("single %.2f s; gap %.1f s: longest run %.2f s, speech %.2f s", one.LongestSpeechRun, c.gap, r.LongestSpeechRun, r.SpeechSeconds)
		if got := r.LongestSpeechRun > 1.8*one.LongestSpeechRun; got != c.cont {
			t.Errorf("gap %.1f s: continuous=%v, want %v", c.gap, got, c.cont)
		}
	}
}

func trimSilence(s []float32) []float32 {
	quiet := func(v float32) bool { return math.Abs(float64(v)) < 1e-3 }
	for len(s) > 0 && quiet(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && quiet(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func analyzeOrErr(t testing.TB, path string) Report {
	s, rate := readWAV(t, path)
	r, _ := Analyze(s, rate)
	return r
}

func TestBadInput(t *testing.T) {
	if _, err := Analyze(make([]float32, 1000), 0); !errors.Is(err, engine.ErrClipUnusable) {
		t.Errorf("rate 0: %v", err)
	}
	if _, err := Analyze(nil, 16000); !isUnusable(err) {
		t.Errorf("empty: %v", err)
	}
	s := make([]float32, 16000*8)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	if _, err := Analyze(s, 16000); !isUnusable(err) {
		t.Errorf("NaN: %v", err)
	}
}

// TestResample: a tone keeps its frequency and level; one above the new
// Nyquist frequency is removed.
func TestResample(t *testing.T) {
	tone := func(f float64, rate, n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(math.Sin(2 * math.Pi * f * float64(i) / float64(rate)))
		}
		return s
	}
	level := func(x []float64, f float64) float64 { // amplitude at f by correlation
		var c, s float64
		x = x[200 : len(x)-200]
		for i, v := range x {
			c += v * math.Cos(2*math.Pi*f*float64(i)/analysisRate)
			s += v * math.Sin(2*math.Pi*f*float64(i)/analysisRate)
		}
		return 2 * math.Hypot(c, s) / float64(len(x))
	}
	for _, rate := range []int{8000, 16000, 22050, 44100, 48000} {
		y := resample(tone(1000, rate, rate), rate, analysisRate)
		if a := level(y, 1000); math.Abs(a-1) > 0.02 {
			t.Errorf("%d Hz: 1 kHz amplitude %.3f", rate, a)
		}
		if rate > 2*7000 {
			y := resample(tone(7000, rate, rate), rate, analysisRate)
			alias := float64(analysisRate) - 7000
			if a := level(y, alias); a > 0.01 {
				t.Errorf("%d Hz: 7 kHz aliased at %.3f", rate, a)
			}
		}
	}
}

// BenchmarkAnalyze reports CPU seconds per audio second on a 15 s clip.
func BenchmarkAnalyze(b *testing.B) {
	needTools(b)
	s, rate := readWAV(b, speak(b, "bench", "en+m3", 50, 175, texts["en"]))
	s = s[:min(len(s), 15*rate)]
	audio := float64(len(s)) / float64(rate)
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Analyze(s, rate); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := float64(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) / 1e9
	b.ReportMetric(cpu/float64(b.N)/audio, "cpu-s/audio-s")
}

// TestSuggestTables: the measured -p table inverts to itself, the variant
// choice follows gender and formant scale, and values stay in espeak range.
func TestSuggestTables(t *testing.T) {
	for _, v := range variants {
		for k, p := range pitchPoints {
			r := Report{F0Median: v.f0[k], F0P10: v.f0[k] / 1.1, F0P90: v.f0[k] * 1.1, FormantScale: v.scale, Gender: v.gender, SpeakingRate: 4.601}
			s := Suggest(r, "en-GB")
			if s.Language != "en" || s.Gender != v.gender || s.Rate != 175 {
				t.Errorf("%s: %+v", v.name, s)
			}
			if s.Variant == v.name && (s.Pitch < p-1 || s.Pitch > p+1 || math.Abs(s.FormantScale-1) > 1e-9) {
				t.Errorf("%s at -p %d: suggested %+v", v.name, p, s)
			}
			if s.Pitch < 0 || s.Pitch > 99 || s.PitchRange < 0 || s.PitchRange > 99 {
				t.Errorf("out of range: %+v", s)
			}
		}
	}
	deep := Suggest(Report{F0Median: 80, F0P10: 70, F0P90: 95, FormantScale: 0.8, Gender: "male"}, "de")
	if deep.Gender != "male" || deep.FormantScale > 0.92 || deep.Language != "de" {
		t.Errorf("deep voice: %+v", deep)
	}
	if s := Suggest(Report{}, ""); s.Language != "en" || s.Pitch != 50 || s.FormantScale != 1 {
		t.Errorf("empty report: %+v", s)
	}
}

func TestVariantFile(t *testing.T) {
	base := "name male3\ngender male\npitch 80 122\nformant 0 100 100 100\nformant 1  96  97 100\nbreath 0 2 3\n"
	got := VariantFile(base, Suggestion{FormantScale: 1.1, Breathiness: 0.5})
	for _, want := range []string{"formant 0 110 100 100", "formant 1 106 97 100", "pitch 80 122", "breath 0 3 3 3 3 3 3 3"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "breath 0 2 3") {
		t.Errorf("old breath line kept:\n%s", got)
	}
}
