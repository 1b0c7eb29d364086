// Package langtag is the one place that decides what a language tag looks
// like and which of an engine's languages speaks it. Voices
// (primary_language, enroll's language), speak and SSE bodies, the
// WebSocket's task_start and the compatible endpoint all ask here.
package langtag

import "strings"

// Canonical checks that tag has the shape of a BCP-47 language tag (a
// primary language of 2-3 letters (or x- / i-), then subtags of 1-8 letters or digits,
// at most 35 characters) and returns it in the canonical case: "EN-us"
// becomes "en-US", "zh-hant-tw" "zh-Hant-TW". Whether an engine speaks it
// is Match's question.
func Canonical(tag string) (string, bool) {
	if len(tag) < 2 || len(tag) > 35 {
		return "", false
	}
	b := []byte(tag)
	start := 0
	private := false // after an "x" singleton, subtags keep their case
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] != '-' {
			c := b[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return "", false
			}
			continue
		}
		sub := b[start:i]
		n := len(sub)
		if n == 0 || n > 8 {
			return "", false
		}
		lowerASCII(sub)
		if start == 0 {
			// 2-3 letters, or the private-use and grandfathered
			// prefixes "x-" and "i-", which need a subtag after them.
			prefix := n == 1 && (sub[0] == 'x' || sub[0] == 'i') && i < len(b)
			if !prefix && (n < 2 || n > 3 || !alphaASCII(sub)) {
				return "", false
			}
			private = sub[0] == 'x' && n == 1
		} else if n == 1 && sub[0] == 'x' {
			private = true
		} else if alphaASCII(sub) && !private {
			switch n {
			case 2: // region
				sub[0], sub[1] = sub[0]-32, sub[1]-32
			case 4: // script
				sub[0] -= 32
			}
		}
		start = i + 1
	}
	return string(b), true
}

// Match finds the engine's tag for a requested one, case
// insensitively: the tag itself, else the longest engine tag that is a
// prefix of it at a subtag boundary ("en-GB" speaks as "en" when the engine
// has no "en-GB"), as in RFC 4647 lookup. A bare language does not reach a
// regional one ("pt" is not "pt-BR"): the client would not get what it
// named. It returns the engine's spelling. An engine that lists no
// languages accepts any well-formed tag.
func Match(tag string, langs []string) (string, bool) {
	if _, ok := Canonical(tag); !ok {
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

func lowerASCII(b []byte) {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
}

func alphaASCII(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}
