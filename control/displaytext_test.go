package control

import "testing"

func TestDisplayText(t *testing.T) {
	for _, s := range []string{"", "ci key", "clé ✓ 🔑", "מפתח", "مفتاح", "नमस्ते", "e\u0301", "a\u200Db"} {
		if !DisplayText(s) {
			t.Errorf("%q refused", s)
		}
	}
	for _, s := range []string{"a\x00", "a\t", "a\n", "a\x7F", "a\u0085", "a\u202A", "a\u202B", "a\u202C", "a\u202D",
		"a\u202E", "a\u2066", "a\u2067", "a\u2068", "a\u2069", "a\u200E", "a\u200F", "a\u061C", "a\u2028", "a\u2029",
		"a\xff"} {
		if DisplayText(s) {
			t.Errorf("%q accepted", s)
		}
	}
}
