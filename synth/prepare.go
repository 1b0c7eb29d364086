package synth

import (
	"strings"

	"voicesvc/control"
	"voicesvc/engine"
)

// Prepare turns validated options and the voice into an engine request.
//
// The voice must be ready (voice_not_ready). The language defaults to the
// voice's primary language and must be one the engine speaks
// (invalid_language, see MatchLanguage); with neither, the engine's first
// language. The voice's settings are defaults
// that the request overrides: speed, pitch and volume map to engine.Params
// as they are; the voice's style is its default expressiveness.
func Prepare(v *control.Voice, o Options, langs []string) (engine.Request, error) {
	if v.Status != control.VoiceReady {
		return engine.Request{}, control.Errorf(control.EVoiceNotReady, "voice %s is %s, not ready", v.ID, v.Status)
	}
	lang := o.Language
	if lang == "" {
		lang = v.PrimaryLanguage
	}
	tag, ok := "", true
	if lang != "" {
		tag, ok = MatchLanguage(lang, langs)
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
	if p.Expressiveness != nil {
		x := *p.Expressiveness // a copy: the engine must not alias the voice
		p.Expressiveness = &x
	}
	return engine.Request{Text: o.Text, Language: tag, Profile: v.Profile, Params: p}, nil
}

// MatchLanguage finds the engine tag for a requested BCP-47 tag, case
// insensitively: the tag itself, else the longest engine tag that is a
// prefix of it at a subtag boundary ("en-GB" speaks as "en" when the engine
// has no "en-GB"), as in RFC 4647 lookup. It returns the engine's spelling.
// An engine that lists no languages accepts any well-formed tag.
func MatchLanguage(tag string, langs []string) (string, bool) {
	if tag == "" || !WellFormedTag(tag) {
		return "", false
	}
	if len(langs) == 0 {
		return tag, true
	}
	for t := tag; ; {
		for _, l := range langs {
			if strings.EqualFold(l, t) {
				return l, true
			}
		}
		i := strings.LastIndexByte(t, '-')
		if i < 0 {
			return "", false
		}
		t = t[:i]
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}
