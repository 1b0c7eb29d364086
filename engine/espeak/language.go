package espeak

import (
	"sort"
	"strings"
)

// normalizeTag spells a language tag the BCP-47 way: "en-us" -> "en-US",
// "en-gb-x-rp" -> "en-GB-x-rp", "ES-419" -> "es-419". Matching is
// case-insensitive, so this only matters for what is shown.
func normalizeTag(tag string) string {
	parts := strings.Split(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"), "-")
	private := false
	for i, p := range parts {
		p = strings.ToLower(p)
		switch {
		case i == 0 || private:
		case p == "x":
			private = true
		case len(p) == 2:
			p = strings.ToUpper(p)
		case len(p) == 4:
			p = strings.ToUpper(p[:1]) + p[1:]
		}
		parts[i] = p
	}
	return strings.Join(parts, "-")
}

func primary(tag string) string {
	p, _, _ := strings.Cut(strings.ToLower(tag), "-")
	return p
}

// languageTable maps lowercase BCP-47 tags to the espeak-ng voice that
// speaks them, preferring espeak-ng's own priorities: the tag "en" goes to
// the voice that lists "en" with the lowest priority number.
type languageTable struct {
	voice map[string]string // lowercase tag -> voice name for SetVoiceByName
	tags  []string          // normalized, sorted
}

func newLanguageTable(voices []espeakVoice) languageTable {
	t := languageTable{voice: map[string]string{}}
	best := map[string]int{}
	for _, v := range voices {
		if strings.HasPrefix(v.Identifier, "mb/") {
			continue // MBROLA voices need databases that may be missing
		}
		id := v.Identifier[strings.LastIndex(v.Identifier, "/")+1:]
		for _, l := range v.Languages {
			key := strings.ToLower(l.Tag)
			if p, ok := best[key]; !ok || l.Priority < p {
				best[key] = l.Priority
				t.voice[key] = id
			}
		}
	}
	for key := range t.voice {
		t.tags = append(t.tags, normalizeTag(key))
	}
	sort.Strings(t.tags)
	return t
}

// lookup finds the voice for tag, falling back to the primary language
// ("en-AU" -> "en") when the region has no voice of its own.
func (t languageTable) lookup(tag string) (string, bool) {
	key := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"))
	if v, ok := t.voice[key]; ok {
		return v, true
	}
	v, ok := t.voice[primary(key)]
	return v, ok
}
