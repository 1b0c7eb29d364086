package espeak

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"voicesvc/codec"
	"voicesvc/engine"
	"voicesvc/engine/analysis"
)

// The acceptance loop through this engine (not the CLI): a reference clip
// whose speaker we set (espeak-ng CLI voice, pitch, sox pitch shift), Enroll,
// Synthesize the same text with the profile, analyse both, compare median
// F0 and formant scale.

var matchText = map[string]string{
	"en": "The old lighthouse keeper walked along the shore every morning, counting the boats that came back from the sea. " +
		"He remembered the names of all the sailors, and he waved to each of them as they passed. " +
		"When the weather turned bad, he lit the lamp early and waited until every boat was safely home.",
	"de": "Der alte Leuchtturmwärter ging jeden Morgen am Ufer entlang und zählte die Boote, die vom Meer zurückkamen. " +
		"Er kannte die Namen aller Seeleute und winkte jedem von ihnen zu. " +
		"Wenn das Wetter schlecht wurde, zündete er die Lampe früh an und wartete, bis jedes Boot sicher zu Hause war.",
	"fr": "Le vieux gardien du phare marchait chaque matin le long du rivage en comptant les bateaux qui revenaient de la mer. " +
		"Il connaissait le nom de tous les marins et il saluait chacun d'eux au passage. " +
		"Quand le temps devenait mauvais, il allumait la lampe plus tôt et attendait que chaque bateau soit rentré.",
}

type matchRef struct {
	name, lang, voice string
	pitch, wpm        int
	sox               []string // sox effects after rendering
}

var matchRefs = []matchRef{
	{"m-low", "en", "en+m1", 25, 175, nil},
	{"m-deep", "en", "en+m3", 50, 175, []string{"pitch", "-200"}},
	{"m-de", "de", "de+m7", 65, 175, nil},
	{"m-fast", "en", "en+m4", 60, 210, nil},
	{"f-high", "en", "en+f2", 80, 175, nil},
	{"f-short", "en", "en+f4", 50, 175, []string{"pitch", "200"}},
	{"f-fr-low", "fr", "fr+f1", 30, 175, nil},
	{"f-slow", "en", "en+f5", 50, 130, nil},
}

func needCLI(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "sox"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
}

func renderRef(t *testing.T, dir string, r matchRef) []byte {
	t.Helper()
	raw := filepath.Join(dir, r.name+"-raw.wav")
	out := filepath.Join(dir, r.name+".wav")
	cmd := exec.Command("espeak-ng", "-v", r.voice, "-p", fmt.Sprint(r.pitch), "-s", fmt.Sprint(r.wpm), "-w", raw, matchText[r.lang])
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("espeak-ng: %v: %s", err, b)
	}
	args := append([]string{raw, "-b", "16", out}, r.sox...)
	if b, err := exec.Command("sox", args...).CombinedOutput(); err != nil {
		t.Fatalf("sox: %v: %s", err, b)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func synthAll(t *testing.T, e *Engine, text, lang string, profile []byte) []float32 {
	t.Helper()
	var pcm []float32
	err := e.Synthesize(context.Background(), engine.Request{Text: text, Language: lang, Profile: profile},
		func(c engine.Chunk) error { pcm = append(pcm, c.Samples...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return pcm
}

func TestEnrollMatching(t *testing.T) {
	needCLI(t)
	e, err := New()
	if err != nil {
		t.Skipf("espeak-ng: %v", err)
	}
	dir := t.TempDir()
	var tab strings.Builder
	fmt.Fprintf(&tab, "\n%-9s %-24s %-7s %7s %7s %6s  %6s %6s %6s\n", "speaker", "reference", "variant", "refF0", "cloneF0", "err%", "refFS", "clFS", "err%")
	for _, r := range matchRefs {
		samples, rate, err := codec.DecodeClip(renderRef(t, dir, r))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := analysis.Analyze(samples, rate)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		prof, err := e.Enroll(context.Background(), engine.Clip{Samples: samples, Rate: rate, Language: r.lang})
		if err != nil {
			t.Fatalf("%s: enroll: %v", r.name, err)
		}
		p, err := ParseProfile(prof)
		if err != nil {
			t.Fatalf("%s: profile: %v", r.name, err)
		}
		out := synthAll(t, e, matchText[r.lang], r.lang, prof)
		c, err := analysis.Analyze(out, e.NativeRate())
		if err != nil {
			t.Fatalf("%s: analysing the clone: %v", r.name, err)
		}
		f0Err := 100 * (c.F0Median/ref.F0Median - 1)
		fsErr := 100 * (analysis.FormantScale(c, ref) - 1)
		desc := fmt.Sprintf("%s -p %d -s %d %s", r.voice, r.pitch, r.wpm, strings.Join(r.sox, " "))
		fmt.Fprintf(&tab, "%-9s %-24s %-7s %7.1f %7.1f %+6.1f  %6.3f %6.3f %+6.1f\n", r.name, desc, p.Variant,
			ref.F0Median, c.F0Median, f0Err, ref.FormantScale, c.FormantScale, fsErr)
		if math.Abs(f0Err) > 10 {
			t.Errorf("%s: clone median F0 %.1f vs reference %.1f (%+.1f%%)", r.name, c.F0Median, ref.F0Median, f0Err)
		}
		if math.Abs(fsErr) > 10 {
			t.Errorf("%s: clone formant scale %+.1f%% off", r.name, fsErr)
		}
	}
	t.Log(tab.String())
}

// BenchmarkEnroll reports the cloning analysis cost in CPU-seconds per
// second of reference audio (process CPU time, all threads).
func BenchmarkEnroll(b *testing.B) {
	if _, err := exec.LookPath("espeak-ng"); err != nil {
		b.Skip("espeak-ng not installed")
	}
	e, err := New()
	if err != nil {
		b.Skip(err)
	}
	raw := filepath.Join(b.TempDir(), "ref.wav")
	if out, err := exec.Command("espeak-ng", "-v", "en+f5", "-w", raw, matchText["en"]).CombinedOutput(); err != nil {
		b.Fatalf("espeak-ng: %v: %s", err, out)
	}
	data, _ := os.ReadFile(raw)
	samples, rate, err := codec.DecodeClip(data)
	if err != nil {
		b.Fatal(err)
	}
	clip := engine.Clip{Samples: samples, Rate: rate, Language: "en"}
	cpu0 := cpuSeconds()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Enroll(context.Background(), clip); err != nil {
			b.Fatal(err)
		}
	}
	audio := float64(len(samples)) / float64(rate) * float64(b.N)
	b.ReportMetric((cpuSeconds()-cpu0)/audio, "cpu-s/audio-s")
	b.ReportMetric(float64(len(samples))/float64(rate), "clip-s")
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
