package espeak

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"voicesvc/engine"
	"voicesvc/engine/analysis"
)

// Enroll analyses the clip (pure Go DSP in package analysis: no espeak-ng
// state is touched, so it runs outside e.mu and in whatever process holds
// the Engine) and returns a marshalled Profile that renders the speaker.
func (e *Engine) enroll(ctx context.Context, clip engine.Clip) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p, err := enrollProfile(clip, e.stockPitch, e.voiceFor)
	if err != nil {
		return nil, err
	}
	return p.Marshal(), nil
}

// voiceFor is the espeak-ng voice for a language tag ("" when unsupported).
func (e *Engine) voiceFor(lang string) string {
	v, _ := e.langs.lookup(lang)
	return v
}

// stockPitch reads the "pitch base top" line of a stock variant, or
// espeak-ng's defaults when the variant sets none.
func (e *Engine) stockPitch(variant string) (base, top float64) {
	text, err := e.data.stockVariant(variant)
	if err != nil {
		return defaultPitchBase, defaultPitchTop
	}
	return parsePitchLine(text)
}

func parsePitchLine(text string) (base, top float64) {
	base, top = defaultPitchBase, defaultPitchTop
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[0] == "pitch" {
			b, err1 := strconv.Atoi(f[1])
			t, err2 := strconv.Atoi(f[2])
			if err1 == nil && err2 == nil {
				base, top = float64(b), float64(t)
			}
		}
	}
	return base, top
}

// pitchOffset is the constant espeak-ng subtracts from a voice file's pitch
// base (voices.c: pitch_base = (pitch1 - 9) << 12). Scaling (base - 9) and
// (top - base) by k scales every F0 espeak-ng produces by k, because its
// intonation is linear in both.
const pitchOffset = 9

// enrollProfile turns a clip into a Profile: analysis.Analyze measures the
// speaker, analysis.Suggest picks the closest stock variant of the
// speaker's gender and the parameters relative to it. Suggest speaks
// espeak's -p scale; this engine keeps -p at 50 and writes pitch in Hz into
// the generated variant, so the variant's pitch line is scaled by
// F0 / BaseF0(variant) instead.
func enrollProfile(clip engine.Clip, stockPitch func(string) (float64, float64), voiceFor func(string) string) (Profile, error) {
	if len(clip.Samples) == 0 {
		return Profile{}, &analysis.SpeechError{Need: analysis.MinContinuousSpeech}
	}
	rep, err := analysis.Analyze(clip.Samples, clip.Rate)
	if err != nil {
		return Profile{}, err
	}
	lang := clip.Language
	if lang == "" {
		lang = "en"
	}
	voice := voiceFor(lang)
	if voice == "" {
		return Profile{}, fmt.Errorf("%w: language %q not supported by espeak-ng", engine.ErrInvalidInput, lang)
	}
	s := analysis.Suggest(rep, lang)
	p := Profile{
		Voice:        voice,
		Language:     lang,
		Variant:      s.Variant,
		Range:        min(max(s.PitchRange, 1), 100),
		FormantScale: round3(min(max(s.FormantScale, 0.5), 2)),
		Rate:         min(max(s.Rate, minRate), maxRate),
		Breath:       round3(min(max(s.Breathiness, 0), 1)),
	}
	base, top := stockPitch(s.Variant)
	if ref := analysis.BaseF0(s.Variant); ref > 0 && s.F0 > 0 {
		k := s.F0 / ref
		b := pitchOffset + k*(base-pitchOffset)
		t := b + k*(top-base)
		p.PitchBase = math.Round(min(max(b, 20), 400))
		p.PitchTop = math.Round(min(max(t, p.PitchBase), 600))
	}
	return p, nil
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
