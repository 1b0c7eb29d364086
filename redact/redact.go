// Package redact keeps secrets out of logs. String rewrites text so that
// API keys (vsk_...), access tokens (vst_...) and the values of the
// headers and query parameters that carry credentials read [REDACTED];
// Handler wraps a slog.Handler so that every record it writes (message and
// attributes, groups included) went through String first.
//
// Redaction is by shape, not by knowing the secrets: a log line may quote
// raw request bytes (the HTTP library logs the header buffer of a request
// it cannot parse), in any case and any escaping, and a credential in a
// malformed header is still a credential.
package redact

import "strings"

// Mask replaces a secret's value; the prefix or name before it is kept, so
// that a log still tells which kind of credential was there.
const Mask = "[REDACTED]"

// tokenPrefixes start every API key and access token (control.APIKeyPrefix,
// control.AccessTokenPrefix). Matched in any case: "VSK_" is not a valid
// key, but it may be a mistyped one.
var tokenPrefixes = []string{"vsk_", "vst_"}

// credentialNames name headers, query parameters and fields whose value is
// a credential, whatever the value looks like. Lower case.
var credentialNames = []string{
	"authorization", // Authorization, Proxy-Authorization
	"x-api-key",
	"api_key",      // WebSocket handshake query
	"access_token", // WebSocket handshake query
	"cookie",       // Cookie, Set-Cookie: dashboard sessions
}

// String returns s with every secret replaced by Mask. Text without
// anything secret-shaped is returned as is, without allocating.
func String(s string) string {
	first := firstSuspect(s)
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:first])
	i := first
	for i < len(s) {
		if n := matchToken(s, i); n > 0 {
			b.WriteString(s[i : i+4]) // the prefix, as written
			b.WriteString(Mask)
			i += n
			continue
		}
		if keep, n := matchCredential(s, i); n > 0 {
			b.WriteString(s[i : i+keep])
			b.WriteString(Mask)
			i += n
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// starts marks the first letters of tokenPrefixes and credentialNames.
var starts = func() (m [256]bool) {
	for _, w := range append(append([]string{}, tokenPrefixes...), credentialNames...) {
		m[w[0]] = true
	}
	return m
}()

// firstSuspect is the index of the first place a secret may start, or -1:
// one pass over s that looks closer only at the first letters of the
// prefixes and names (about 180 ns for a 60-byte access-log value).
func firstSuspect(s string) int {
	for i := 0; i < len(s); i++ {
		if !starts[toLower(s[i])] {
			continue
		}
		for _, p := range tokenPrefixes {
			if hasPrefixFold(s[i:], p) {
				return i
			}
		}
		for _, n := range credentialNames {
			if hasPrefixFold(s[i:], n) {
				return i
			}
		}
	}
	return -1
}

// matchToken: at i a token prefix followed by at least one token
// character; the length of prefix and characters, else 0.
func matchToken(s string, i int) int {
	for _, p := range tokenPrefixes {
		if hasPrefixFold(s[i:], p) {
			j := i + len(p)
			for j < len(s) && isTokenChar(s[j]) {
				j++
			}
			if j > i+len(p) {
				return j - i
			}
		}
	}
	return 0
}

// matchCredential: at i a credential name, a separator (":" of a header,
// "=" of a query or a logfmt attribute, either inside quotes or escaped
// quotes, as in JSON) and a value. It returns how much to keep (name and
// separator) and how much the match spans; n == 0 when nothing matched.
func matchCredential(s string, i int) (keep, n int) {
	for _, name := range credentialNames {
		if !hasPrefixFold(s[i:], name) {
			continue
		}
		j := i + len(name)
		j = skipQuote(s, j)
		j = skipSpace(s, j)
		if j >= len(s) || (s[j] != ':' && s[j] != '=') {
			continue
		}
		header := s[j] == ':'
		j = skipSpace(s, j+1)
		j = skipQuote(s, j)
		start := j
		for j < len(s) && !endsValue(s[j], header) {
			j++
		}
		if j == start {
			continue
		}
		return start - i, j - i
	}
	return 0, 0
}

// endsValue: where a credential's value ends. A header value (after ":")
// runs to the end of its line and may hold spaces ("Bearer vst_..."); a
// query or attribute value (after "=") ends at a space too. A quote or a
// backslash ends both: the value was quoted, or the text is escaped (the
// HTTP library logs request bytes with Go quoting, "\r\n" included).
func endsValue(c byte, header bool) bool {
	switch c {
	case '\r', '\n', '"', '\'', '\\', '&':
		return true
	case ' ', '\t', ',', ';':
		return !header
	}
	return c < 0x20 || c == 0x7f
}

func skipSpace(s string, j int) int {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j
}

// skipQuote skips a quote or an escaped quote (\").
func skipQuote(s string, j int) int {
	switch {
	case j < len(s) && (s[j] == '"' || s[j] == '\''):
		return j + 1
	case j+1 < len(s) && s[j] == '\\' && s[j+1] == '"':
		return j + 2
	}
	return j
}

func isTokenChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// hasPrefixFold: s starts with lower (ASCII lower case), in any case.
func hasPrefixFold(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for k := 0; k < len(lower); k++ {
		if toLower(s[k]) != lower[k] {
			return false
		}
	}
	return true
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
