package engine

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Span is a piece of the original text: Text == original[Start:End].
type Span struct {
	Start, End int
	Text       string
}

// Sentences splits text into sentences. Offsets are bytes into text.
// Boundaries: . ! ? … (followed by whitespace or the end), the Devanagari
// danda । and ॥, CJK 。！？ (no space needed), and every newline. Closing
// quotes and brackets after a terminator stay with the sentence. Spans are
// trimmed of surrounding whitespace; spans with no letter or digit (nothing
// to speak) are dropped.
func Sentences(text string) []Span {
	spans, _ := scan(text, true)
	return spans
}

// CutComplete is the incremental form for text that arrives in pieces. It
// returns only the sentences whose end is certain whatever text is appended
// later (a terminator followed by whitespace, or a newline) and rest, the
// offset where the pending tail starts: the caller keeps buf[rest:] and
// appends to it. An abbreviation or "3." at the end of buf is not certain.
func CutComplete(buf string) (sentences []Span, rest int) {
	return scan(buf, false)
}

// Words splits text into whitespace-separated words with leading and
// trailing punctuation removed. Engines use it to number word events.
func Words(text string) []Span {
	var out []Span
	i := 0
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		if unicode.IsSpace(r) {
			i += n
			continue
		}
		j := i
		for j < len(text) {
			r, n := utf8.DecodeRuneInString(text[j:])
			if unicode.IsSpace(r) {
				break
			}
			j += n
		}
		s, e := trimPunct(text, i, j)
		if s < e {
			out = append(out, Span{Start: s, End: e, Text: text[s:e]})
		}
		i = j
	}
	return out
}

func trimPunct(text string, s, e int) (int, int) {
	for s < e {
		r, n := utf8.DecodeRuneInString(text[s:e])
		if isWordRune(r) {
			break
		}
		s += n
	}
	for e > s {
		r, n := utf8.DecodeLastRuneInString(text[s:e])
		if isWordRune(r) {
			break
		}
		e -= n
	}
	return s, e
}

// isWordRune: letters, digits and combining marks (Devanagari vowel signs
// are marks, not letters).
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

// closers may follow a terminator and still belong to its sentence.
const closers = "\"'”’»)]}」』》〉）】"

func isCloser(r rune) bool { return strings.ContainsRune(closers, r) }

// isLatinTerm ends a sentence only when whitespace (or the end) follows.
func isLatinTerm(r rune) bool { return r == '.' || r == '!' || r == '?' || r == '…' }

// isHardTerm ends a sentence whatever follows: scripts written without
// spaces between sentences.
func isHardTerm(r rune) bool {
	switch r {
	case '।', '॥', '。', '！', '？':
		return true
	}
	return false
}

// Abbreviations (lowercase, without their final dot). neverFinal ones never
// end a sentence; maybeFinal ones end one only before an uppercase word.
var (
	neverFinal = map[string]bool{
		"dr": true, "mr": true, "mrs": true, "ms": true, "prof": true,
		"st": true, "mt": true, "vs": true, "cf": true, "e.g": true,
		"i.e": true, "approx": true, "fig": true, "gen": true, "sgt": true,
		"capt": true, "lt": true, "col": true, "rev": true, "hon": true,
		"sen": true, "rep": true, "gov": true, "pres": true, "dept": true,
		"ave": true,
	}
	maybeFinal = map[string]bool{
		"etc": true, "jr": true, "sr": true, "inc": true, "ltd": true,
		"co": true, "corp": true, "a.m": true, "p.m": true,
	}
)

type dotKind int

const (
	dotFinal dotKind = iota // an ordinary full stop
	dotNever                // an abbreviation, initial or list number
	dotMaybe                // depends on the next word
)

// classifyDot looks at the token that ends with the '.' at text[dot].
func classifyDot(text string, sentStart, dot int) dotKind {
	start := dot
	for start > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:start])
		if unicode.IsSpace(r) || r == '(' || r == '"' || r == '\'' || r == '“' {
			break
		}
		start -= n
	}
	tok := text[start:dot]
	if tok == "" {
		return dotFinal
	}
	low := strings.ToLower(tok)
	if neverFinal[low] {
		return dotNever
	}
	if maybeFinal[low] {
		return dotMaybe
	}
	// A single capital letter is an initial ("J. Smith").
	if r, n := utf8.DecodeRuneInString(tok); n == len(tok) && unicode.IsUpper(r) {
		return dotNever
	}
	// Dotted acronyms: "U.S", "U.K", "Ph.D".
	if strings.Contains(tok, ".") && isDottedAcronym(tok) {
		return dotMaybe
	}
	// "1." opening a sentence (or after a colon) is a list number. (The sentence start, not
	// the line start, so that CutComplete's buffer, which begins at a
	// sentence, decides the same way as the whole text.)
	if isDigits(tok) && listPosition(text, sentStart, start) {
		return dotNever
	}
	return dotFinal
}

func isDottedAcronym(tok string) bool {
	for _, part := range strings.Split(tok, ".") {
		if part == "" || len(part) > 2 {
			return false
		}
		for _, r := range part {
			if !unicode.IsLetter(r) {
				return false
			}
		}
	}
	return true
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// listPosition: the token at start opens the sentence or follows a colon
// ("Steps: 1. Open it.").
func listPosition(text string, sentStart, start int) bool {
	if skipSpace(text, sentStart) == start {
		return true
	}
	s, e := trimSpace(text, sentStart, start)
	return s < e && text[e-1] == ':'
}

// scan is the one segmenter behind Sentences (final: the text is complete)
// and CutComplete (not final: stop at the first boundary that later text
// could change).
func scan(text string, final bool) (spans []Span, rest int) {
	start := 0 // start of the current sentence
	emit := func(end, next int) {
		s, e := trimSpace(text, start, end)
		if s < e && hasWord(text[s:e]) {
			spans = append(spans, Span{Start: s, End: e, Text: text[s:e]})
		}
		start, rest = next, next
	}
	i := 0
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch {
		case r == '\n' || r == '\r':
			emit(i, i+n)
			i += n
		case isHardTerm(r) || isLatinTerm(r):
			end, certain, boundary := terminatorEnd(text, start, i, final)
			if !certain {
				return spans, skipSpace(text, rest)
			}
			if boundary {
				emit(end, end)
			}
			i = end
		default:
			i += n
		}
	}
	if final {
		emit(len(text), len(text))
	}
	return spans, skipSpace(text, rest)
}

// terminatorEnd decides whether the terminator at text[i] ends a sentence.
// end is past the terminator run and its closers. certain is false when
// that decision needs text past the end of a non-final buffer.
func terminatorEnd(text string, sentStart, i int, final bool) (end int, certain, boundary bool) {
	hard := false
	j := i
	for j < len(text) {
		r, n := utf8.DecodeRuneInString(text[j:])
		if !isLatinTerm(r) && !isHardTerm(r) {
			break
		}
		hard = hard || isHardTerm(r)
		j += n
	}
	// Only a lone '.' can be an abbreviation; "...", "?!" and the like
	// always end a sentence before whitespace.
	loneDot := j-i == 1 && text[i] == '.'
	for j < len(text) {
		r, n := utf8.DecodeRuneInString(text[j:])
		if !isCloser(r) {
			break
		}
		j += n
	}
	if j == len(text) {
		// A closer or more text may still come.
		return j, final, final
	}
	next, _ := utf8.DecodeRuneInString(text[j:])
	if hard {
		return j, true, true
	}
	if !unicode.IsSpace(next) {
		return j, true, false // "3.14", "e.g", "Hi!Bob"
	}
	if !loneDot {
		return j, true, true
	}
	switch classifyDot(text, sentStart, i) {
	case dotNever:
		return j, true, false
	case dotMaybe:
		k := skipSpace(text, j)
		if k == len(text) {
			return j, final, final
		}
		if strings.ContainsAny(text[j:k], "\n\r") {
			return j, true, true
		}
		r, _ := utf8.DecodeRuneInString(text[k:])
		return j, true, unicode.IsUpper(r)
	}
	return j, true, true
}

func skipSpace(text string, i int) int {
	for i < len(text) {
		r, n := utf8.DecodeRuneInString(text[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}

func trimSpace(text string, s, e int) (int, int) {
	s = skipSpace(text[:e], s)
	for e > s {
		r, n := utf8.DecodeLastRuneInString(text[s:e])
		if !unicode.IsSpace(r) {
			break
		}
		e -= n
	}
	return s, e
}

func hasWord(s string) bool {
	for _, r := range s {
		if isWordRune(r) {
			return true
		}
	}
	return false
}
