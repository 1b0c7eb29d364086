package analysis

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The closed loop of the acceptance criterion, with the espeak-ng CLI
// standing in for the engine: analyse a reference whose speaker parameters
// we set, Suggest a profile, render the same text with it (variant file from
// VariantFile, -p and -s from the suggestion), analyse the rendering, and
// require median F0 and formant scale within 10% of the reference's.

const espeakData = "/usr/lib/x86_64-linux-gnu/espeak-ng-data"

var (
	dataOnce sync.Once
	dataRoot string // directory holding our espeak-ng-data overlay
	dataErr  error
)

// espeakOverlay mirrors the system espeak-ng-data with symlinks, except
// voices/!v, which is a real directory where clone variants can be written.
func espeakOverlay(t testing.TB) string {
	dataOnce.Do(func() {
		dataRoot = filepath.Join(clipDir, "espeak")
		dataErr = overlay(espeakData, filepath.Join(dataRoot, "espeak-ng-data"))
	})
	if dataErr != nil {
		t.Skipf("no espeak-ng data overlay: %v", dataErr)
	}
	return dataRoot
}

func overlay(src, dst string) error {
	vdst := filepath.Join(dst, "voices", "!v")
	if err := os.MkdirAll(vdst, 0o755); err != nil {
		return err
	}
	link := func(dir, to string, skip string) error {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range ents {
			if e.Name() != skip {
				if err := os.Symlink(filepath.Join(dir, e.Name()), filepath.Join(to, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := link(src, dst, "voices"); err != nil {
		return err
	}
	if err := link(filepath.Join(src, "voices"), filepath.Join(dst, "voices"), "!v"); err != nil {
		return err
	}
	return link(filepath.Join(src, "voices", "!v"), vdst, "")
}

type reference struct {
	name, lang, desc string
	make             func(t testing.TB, name string) string
}

func espeakRef(voice string, pitch, wpm int, lang string) func(testing.TB, string) string {
	return func(t testing.TB, name string) string { return speak(t, name, voice, pitch, wpm, texts[lang]) }
}

func soxRef(voice string, pitch int, lang string, effect ...string) func(testing.TB, string) string {
	return func(t testing.TB, name string) string {
		return soxed(t, name, speak(t, name+"-src", voice, pitch, 175, texts[lang]), effect...)
	}
}

var references = []reference{
	{"m-low", "en", "en+m1 -p 25", espeakRef("en+m1", 25, 175, "en")},
	{"m-deep", "en", "en+m3 -p 50, sox pitch -200 (F0, formants x0.891)", soxRef("en+m3", 50, "en", "pitch", "-200")},
	{"m-de", "de", "de+m7 -p 65", espeakRef("de+m7", 65, 175, "de")},
	{"m-hi", "hi", "hi+m2 -p 50, sox speed 1.08", soxRef("hi+m2", 50, "hi", "speed", "1.08")},
	{"f-high", "en", "en+f2 -p 80", espeakRef("en+f2", 80, 175, "en")},
	{"f-short", "en", "en+f4 -p 50, sox pitch +200 (F0, formants x1.122)", soxRef("en+f4", 50, "en", "pitch", "200")},
	{"f-fr-low", "fr", "fr+f1 -p 30", espeakRef("fr+f1", 30, 175, "fr")},
	{"f-slow", "en", "en+f5 -p 50 -s 130", espeakRef("en+f5", 50, 130, "en")},
}

func TestCloneMatching(t *testing.T) {
	needTools(t)
	root := espeakOverlay(t)
	var table strings.Builder
	fmt.Fprintf(&table, "\n%-9s %-32s %7s %7s %6s  %6s %6s %6s  %5s %5s  %s\n", "speaker", "suggestion", "refF0", "cloneF0", "err%", "refFS", "clone", "err%", "refSR", "clSR", "reference")
	for i, ref := range references {
		r := analyzeFile(t, ref.make(t, "clone-ref-"+ref.name))
		s := Suggest(r, ref.lang)
		base, err := os.ReadFile(filepath.Join(espeakData, "voices", "!v", s.Variant))
		if err != nil {
			t.Fatal(err)
		}
		variant := fmt.Sprintf("clone%d", i)
		vf := filepath.Join(root, "espeak-ng-data", "voices", "!v", variant)
		if err := os.WriteFile(vf, []byte(VariantFile(string(base), s)), 0o644); err != nil {
			t.Fatal(err)
		}
		s.Variant = variant
		out := clip(t, "clone-out-"+ref.name, func(out string) error {
			return run("espeak-ng", "--path="+root, "-v", s.VoiceName(), "-p", fmt.Sprint(s.Pitch),
				"-s", fmt.Sprint(s.Rate), "-w", out, texts[ref.lang])
		})
		c := analyzeFile(t, out)
		f0Err := pctErr(c.F0Median, r.F0Median)
		fsErr := 100 * (FormantScale(c, r) - 1)
		fmt.Fprintf(&table, "%-9s %-32s %7.1f %7.1f %+6.1f  %6.3f %6.3f %+6.1f  %5.2f %5.2f  %s\n", ref.name, suggestLabel(r, ref.lang),
			r.F0Median, c.F0Median, f0Err, r.FormantScale, c.FormantScale, fsErr, r.SpeakingRate, c.SpeakingRate, ref.desc)
		if math.Abs(f0Err) > 10 {
			t.Errorf("%s: clone F0 %.1f vs reference %.1f (%+.1f%%)", ref.name, c.F0Median, r.F0Median, f0Err)
		}
		if math.Abs(fsErr) > 10 {
			t.Errorf("%s: clone formant scale %.3f vs reference %.3f (%+.1f%%)", ref.name, c.FormantScale, r.FormantScale, fsErr)
		}
		if c.Gender != r.Gender {
			t.Errorf("%s: clone gender %s, reference %s", ref.name, c.Gender, r.Gender)
		}
	}
	t.Log(table.String())
}

// suggestLabel is the suggestion in espeak CLI terms, for the table.
func suggestLabel(r Report, lang string) string {
	s := Suggest(r, lang)
	return fmt.Sprintf("%s -p %d -s %d fs %.2f", s.VoiceName(), s.Pitch, s.Rate, s.FormantScale)
}
