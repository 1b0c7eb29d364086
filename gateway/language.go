package gateway

import (
	"strings"

	"voicesvc/control"
)

// canonicalLanguage checks that tag has the shape of a BCP-47 language tag
// (a 2-3 letter language, then subtags of 1-8 letters or digits) and returns
// it in the canonical case: "EN-us" becomes "en-US", "zh-hant-tw"
// "zh-Hant-TW". Whether an engine speaks it is checked separately.
func canonicalLanguage(tag string) (string, bool) {
	if len(tag) < 2 || len(tag) > 35 {
		return "", false
	}
	b := []byte(tag)
	start := 0
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
		lower(sub)
		if start == 0 {
			if n < 2 || n > 3 || !alpha(sub) {
				return "", false
			}
		} else if alpha(sub) {
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

func lower(b []byte) {
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 32
		}
	}
}

func alpha(b []byte) bool {
	for _, c := range b {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// primarySubtag is the language part of a tag ("pt" of "pt-BR").
func primarySubtag(tag string) string {
	if i := strings.IndexByte(tag, '-'); i >= 0 {
		return tag[:i]
	}
	return tag
}

// supportsLanguage reports whether an engine listing supported speaks tag:
// an exact match (any case), or the same primary language, since engines
// list regional variants ("en-us") and clients ask for "en" or "en-IN".
func supportsLanguage(supported []string, tag string) bool {
	p := primarySubtag(tag)
	for _, s := range supported {
		if strings.EqualFold(s, tag) || strings.EqualFold(primarySubtag(s), p) {
			return true
		}
	}
	return false
}

// checkLanguage refuses a tag the engine does not speak. Without an engine
// (not wired yet) only the shape was checked.
func (s *Server) checkLanguage(tag string) error {
	if s.engine == nil || supportsLanguage(s.engine.Languages(), tag) {
		return nil
	}
	return control.Errorf(control.EInvalidLanguage, "language %q is not supported", tag)
}
