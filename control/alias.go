package control

import "fmt"

// Workspace voice aliases (docs/api.md, "Workspace voice aliases").
const (
	// MaxAliasesPerVoice bounds one workspace's aliases of one voice.
	MaxAliasesPerVoice = 32
	// MaxAliasLen bounds an alias, in characters (bytes: ASCII only).
	MaxAliasLen = 64
	// ChangeAlias is the Change kind of a workspace's alias changes; the
	// Change's ID is the workspace id.
	ChangeAlias = "alias"
)

// ValidAlias reports whether a may be a workspace alias: 1-64 characters of
// [A-Za-z0-9._-] that do not look like a voice id (24 hexadecimal
// characters, either case).
func ValidAlias(a string) bool { return aliasProblem(a) == "" }

// aliasProblem says what is wrong with a, or "" when nothing.
func aliasProblem(a string) string {
	if a == "" {
		return "is empty"
	}
	if len(a) > MaxAliasLen {
		return fmt.Sprintf("is longer than %d characters", MaxAliasLen)
	}
	hex := len(a) == 24
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
		case c >= 'g' && c <= 'z', c >= 'G' && c <= 'Z', c == '.', c == '_', c == '-':
			hex = false
		default:
			return "may hold only letters, digits, '.', '_' and '-'"
		}
	}
	if hex {
		return "looks like a voice id (24 hexadecimal characters)"
	}
	return ""
}

// ValidateAliases checks a voice's new list of workspace aliases and returns
// it as it is to be stored: the same names in the same order (a nil list
// becomes an empty one). An alias that is not ValidAlias, one that appears
// twice, or more than MaxAliasesPerVoice of them: EInvalidRequest with
// Param "aliases", whose message names the alias at fault.
func ValidateAliases(aliases []string) ([]string, error) {
	if len(aliases) > MaxAliasesPerVoice {
		return nil, &Error{Code: EInvalidRequest, Param: "aliases",
			Message: fmt.Sprintf("at most %d aliases per voice, got %d", MaxAliasesPerVoice, len(aliases))}
	}
	out := make([]string, 0, len(aliases))
	seen := make(map[string]bool, len(aliases))
	for _, a := range aliases {
		if p := aliasProblem(a); p != "" {
			return nil, &Error{Code: EInvalidRequest, Param: "aliases", Message: fmt.Sprintf("alias %q %s", clip(a), p)}
		}
		if seen[a] {
			return nil, &Error{Code: EInvalidRequest, Param: "aliases", Message: fmt.Sprintf("alias %q appears twice", a)}
		}
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}

// AliasTaken is the refusal of an alias another voice of the workspace
// holds.
func AliasTaken(alias string) *Error {
	return &Error{Code: EAliasTaken, Param: "aliases",
		Message: fmt.Sprintf("alias %q is taken by another voice of this workspace", alias)}
}

// clip shortens a refused alias for a message.
func clip(a string) string {
	if len(a) > MaxAliasLen {
		return a[:MaxAliasLen] + "..."
	}
	return a
}
