package synth

import (
	"strings"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/langtag"
)

// Prepare turns validated options and the voice into an engine request.
//
// The voice is one Service.Voice let through (ready, usable). The language defaults to the
// voice's primary language and must be one the engine speaks
// (invalid_language, see langtag.Match); with neither, the engine's first
// language. The voice's settings are defaults
// that the request overrides: speed, pitch and volume map to engine.Params
// as they are; the voice's style is its default expressiveness.
func Prepare(v *control.Voice, o Options, langs []string) (engine.Request, error) {
	lang := o.Language
	if lang == "" {
		lang = v.PrimaryLanguage
	}
	tag, ok := "", true
	if lang != "" {
		tag, ok = langtag.Match(lang, langs)
	} else if len(langs) > 0 {
		tag = langs[0] // a voice without a language speaks the engine's first
	}
	if !ok {
		return engine.Request{}, control.Errorf(control.EInvalidLanguage,
			"language %q is not supported; supported: %s", lang, strings.Join(langs, ", "))
	}

	p := engine.Params{NumStep: o.NumStep}
	if p.NumStep == 0 {
		p.NumStep = DefaultNumStep
	}
	if s := v.Settings; s != nil {
		p.Speed = deref(s.Speed)
		p.Pitch = deref(s.Pitch)
		p.Volume = deref(s.Volume)
		p.Expressiveness = s.Style
	}
	if o.Speed != nil {
		p.Speed = *o.Speed
	}
	if o.Pitch != nil {
		p.Pitch = *o.Pitch
	}
	if o.Volume != nil {
		p.Volume = *o.Volume
	}
	if o.Expressiveness != nil {
		p.Expressiveness = o.Expressiveness
	}
	if o.GuidanceScale != nil {
		p.GuidanceScale = *o.GuidanceScale
	}
	if p.Expressiveness != nil {
		x := *p.Expressiveness // a copy: the engine must not alias the voice
		p.Expressiveness = &x
	}
	return engine.Request{Text: o.Text, Language: tag, Profile: v.Profile, Params: p}, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
