package langtag

import "testing"

func TestCanonical(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"en", "en", true},
		{"hi", "hi", true},
		{"EN-us", "en-US", true},
		{"en-US", "en-US", true},
		{"zh-hant-tw", "zh-Hant-TW", true},
		{"pt-BR", "pt-BR", true},
		{"es-419", "es-419", true},
		{"yue", "yue", true},
		{"de-CH-1996", "de-CH-1996", true},
		{"x-klingon", "x-klingon", true},
		{"chr-us-qaaa-x-west", "chr-US-Qaaa-x-west", true},
		{"e", "", false},
		{"x", "", false},
		{"x-", "", false},
		{"english", "", false},
		{"en_US", "", false},
		{"en-", "", false},
		{"-en", "", false},
		{"en--us", "", false},
		{"en--US", "", false},
		{"12", "", false},
		{"9x", "", false},
		{"en-abcdefghi", "", false},
		{"en-US-abcdefghi", "", false},
		{"ह", "", false},
		{"en US", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Canonical(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Canonical(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMatch(t *testing.T) {
	langs := []string{"en", "en-us", "en-gb", "hi", "pt-BR"}
	tests := []struct {
		tag, want string
		ok        bool
	}{
		{"en-us", "en-us", true},
		{"EN-US", "en-us", true},
		{"en-GB-oxendict", "en-gb", true}, // prefix lookup
		{"en", "en", true},
		{"en-IN", "en", true},
		{"pt", "", false}, // a bare language does not reach a regional one
		{"pt-br", "pt-BR", true},
		{"hi", "hi", true},
		{"hi-IN", "hi", true},
		{"fr", "", false},
		{"en_US", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := Match(tt.tag, langs)
		if got != tt.want || ok != tt.ok {
			t.Errorf("Match(%q) = %q, %v; want %q, %v", tt.tag, got, ok, tt.want, tt.ok)
		}
	}
	// Lookup prefers the longer prefix, then the bare language.
	if got, _ := Match("en-GB", []string{"en", "en-gb", "en-us"}); got != "en-gb" {
		t.Errorf("en-GB matched %q", got)
	}
	if got, ok := Match("tlh", nil); !ok || got != "tlh" {
		t.Errorf("an engine without a list refused %q", got)
	}
}
