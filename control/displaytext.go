package control

import (
	"unicode"
	"unicode/utf8"
)

// DisplayText reports whether s may be shown as a name (of a key, a voice,
// a workspace, a label): valid UTF-8 without control characters (C0, DEL,
// C1), line or paragraph separators, or the bidirectional formatting
// characters that reorder the text around them: the embeddings and
// overrides U+202A-U+202E, the isolates U+2066-U+2069 and the marks U+200E,
// U+200F and U+061C. With those, "report\u202Efdp.exe" reads as
// "reportexe.pdf" wherever the name is shown, the dashboard's key list
// included. Text in any script, combining marks and emoji pass.
func DisplayText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || bidiFormat(r) || r == '\u2028' || r == '\u2029' {
			return false
		}
	}
	return true
}

func bidiFormat(r rune) bool {
	return (r >= '\u202A' && r <= '\u202E') || (r >= '\u2066' && r <= '\u2069') ||
		r == '\u200E' || r == '\u200F' || r == '\u061C'
}
