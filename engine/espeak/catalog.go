package espeak

import "voicesvc/engine"

// catalogEntry is one public voice: who it is and the profile behind it.
type catalogEntry struct {
	alias, name, lang string
	gender, accent    string
	age, useCase      string
	profile           Profile
}

// catalog: espeak-ng voices combined with stock variants and pitch and
// formant settings, so each alias sounds distinct.
var catalog = []catalogEntry{
	{"en-us-john", "John", "en", "male", "american", "middle_aged", "narration",
		Profile{Voice: "en-US", Language: "en-US", Variant: "m1", PitchBase: 78, PitchTop: 112}},
	{"en-us-linda", "Linda", "en", "female", "american", "young", "conversational",
		Profile{Voice: "en-US", Language: "en-US", Variant: "f1", Rate: 180}},
	{"en-us-max", "Max", "en", "male", "american", "young", "characters",
		Profile{Voice: "en-US", Language: "en-US", Variant: "m3", PitchBase: 100, PitchTop: 150, FormantScale: 1.05, Rate: 190}},
	{"en-gb-edward", "Edward", "en", "male", "british", "middle_aged", "news",
		Profile{Voice: "en", Language: "en-GB", Variant: "m2", Rate: 170}},
	{"en-gb-annie", "Annie", "en", "female", "british", "old", "storytelling",
		Profile{Voice: "en", Language: "en-GB", Variant: "f3", Rate: 160, Breath: 0.4}},
	{"hi-aarav", "Aarav", "hi", "male", "indian", "middle_aged", "narration",
		Profile{Voice: "hi", Language: "hi", Variant: "m3"}},
	{"hi-ananya", "Ananya", "hi", "female", "indian", "young", "conversational",
		Profile{Voice: "hi", Language: "hi", Variant: "f2", PitchBase: 150, PitchTop: 230}},
	{"es-lucia", "Lucía", "es", "female", "castilian", "young", "conversational",
		Profile{Voice: "es", Language: "es", Variant: "f4"}},
	{"es-mateo", "Mateo", "es", "male", "latin_american", "middle_aged", "news",
		Profile{Voice: "es-419", Language: "es-419", Variant: "m2"}},
	{"fr-camille", "Camille", "fr", "female", "parisian", "middle_aged", "narration",
		Profile{Voice: "fr", Language: "fr-FR", Variant: "f5"}},
	{"de-lukas", "Lukas", "de", "male", "standard", "middle_aged", "news",
		Profile{Voice: "de", Language: "de", Variant: "m4"}},
	{"it-giulia", "Giulia", "it", "female", "standard", "young", "storytelling",
		Profile{Voice: "it", Language: "it", Variant: "f2", Rate: 170}},
	{"pt-br-rafael", "Rafael", "pt", "male", "brazilian", "young", "conversational",
		Profile{Voice: "pt-BR", Language: "pt-BR", Variant: "m5"}},
}

// Catalog lists the built-in public voices; each Profile is a marshalled
// Profile.
func (e *Engine) Catalog() []engine.CatalogVoice {
	out := make([]engine.CatalogVoice, 0, len(catalog))
	for _, c := range catalog {
		out = append(out, engine.CatalogVoice{
			Alias:    c.alias,
			Name:     c.name,
			Language: c.lang,
			Labels:   map[string]string{"gender": c.gender, "accent": c.accent, "age": c.age, "use_case": c.useCase},
			Profile:  c.profile.Marshal(),
		})
	}
	return out
}
