package synth

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
)

// Limits of interface 4.5 and 8.
const (
	MaxTextChars      = 10_000 // code points, control.CountChars
	MinSampleRate     = 8_000
	MaxSampleRate     = 48_000
	DefaultSampleRate = 24_000
	MaxNumStep        = 32
	DefaultNumStep    = 32
)

// Options is a validated synthesis request, the same for every transport.
type Options struct {
	Text       string
	Language   string // BCP-47, well formed; "" = the voice's primary language
	Format     codec.Format
	SampleRate int
	NumStep    int
	// Nil fields fall back to the voice's settings, then the engine default.
	// Speak and stream bodies set only Expressiveness; the others are for
	// transports that carry them (WebSocket length_scale is 1/Speed).
	Expressiveness *float64
	Speed          *float64
	Pitch          *float64
	Volume         *float64
}

// Chars is what the request is metered and limited by.
func (o Options) Chars() int64 { return control.CountChars(o.Text) }

// ParseSpeak validates a POST /voices/{id}/speak body (interface 4.5). The
// default format is wav. Every error is a 400 *control.Error.
func ParseSpeak(body []byte) (Options, error) { return parse(body, codec.WAV, true) }

// ParseStream validates a POST /voices/{id}/stream body (interface 4.6): raw
// PCM only, f32le by default; wav is invalid_output_format.
func ParseStream(body []byte) (Options, error) { return parse(body, codec.F32LE, false) }

// The rules, per field, when a value is present and not null (null is read
// as absent for optional fields and as missing for text):
//
//	text            string, not blank      else text_required / invalid_request (not a string)
//	                at most 10,000 points  else text_too_long
//	language        well-formed BCP-47     else invalid_language (engine support: Prepare)
//	output_format   exact lower-case name  else invalid_output_format
//	sample_rate     integer 8000-48000     else invalid_sample_rate (24000.0 is an integer)
//	num_step        integer 1-32           else invalid_num_step
//	expressiveness  number 0-1             else invalid_expressiveness
//
// A wrong type is refused with the field's own code. Keys match exactly
// (encoding/json would also take "Text"); unknown keys are ignored; of
// duplicate keys the last wins, as in encoding/json. Fields are checked in
// the order above whatever their order in the body, so one body always
// answers one code.
func parse(body []byte, def codec.Format, allowWAV bool) (Options, error) {
	// json.Valid allocates nothing and lets the walk below assume a
	// well-formed document.
	if !json.Valid(body) {
		return Options{}, control.Errorf(control.EInvalidJSON, "the body is not valid JSON")
	}
	var f rawFields
	if !f.scan(body) {
		return Options{}, control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	o := Options{Format: def, SampleRate: DefaultSampleRate, NumStep: DefaultNumStep}

	if isNull(f.text) {
		return o, control.Errorf(control.ETextRequired, "text is required")
	}
	text, ok := decodeString(f.text)
	if !ok {
		return o, control.Errorf(control.EInvalidRequest, "text must be a string")
	}
	if strings.TrimSpace(text) == "" {
		return o, control.Errorf(control.ETextRequired, "text is required")
	}
	if n := control.CountChars(text); n > MaxTextChars {
		return o, control.Errorf(control.ETextTooLong, "text has %d characters; the limit is %d", n, MaxTextChars)
	}
	o.Text = text

	if !isNull(f.language) {
		lang, ok := decodeString(f.language)
		if !ok || (lang != "" && !WellFormedTag(lang)) {
			return o, control.Errorf(control.EInvalidLanguage, "language must be a BCP-47 tag such as \"en\" or \"hi\"")
		}
		o.Language = lang
	}

	if !isNull(f.format) {
		s, _ := decodeString(f.format)
		fm, ok := codec.ParseFormat(s)
		if !ok || !(fm.IsPCM() || allowWAV && fm == codec.WAV) {
			if allowWAV {
				return o, control.Errorf(control.EInvalidOutputFormat, "output_format must be one of wav, s16le, s24le, s32le, f32le, f64le")
			}
			return o, control.Errorf(control.EInvalidOutputFormat, "output_format must be one of s16le, s24le, s32le, f32le, f64le")
		}
		o.Format = fm
	}

	if !isNull(f.rate) {
		v, ok := integer(f.rate, MinSampleRate, MaxSampleRate)
		if !ok {
			return o, control.Errorf(control.EInvalidSampleRate, "sample_rate must be an integer from %d to %d", MinSampleRate, MaxSampleRate)
		}
		o.SampleRate = v
	}

	if !isNull(f.numStep) {
		v, ok := integer(f.numStep, 1, MaxNumStep)
		if !ok {
			return o, control.Errorf(control.EInvalidNumStep, "num_step must be an integer from 1 to %d", MaxNumStep)
		}
		o.NumStep = v
	}

	if !isNull(f.expr) {
		v, ok := number(f.expr)
		if !ok || v < 0 || v > 1 {
			return o, control.Errorf(control.EInvalidExpressive, "expressiveness must be a number from 0 to 1")
		}
		o.Expressiveness = &v
	}
	return o, nil
}

// rawFields holds the raw JSON value of each known key; nil when absent.
type rawFields struct {
	text, language, format, rate, numStep, expr []byte
}

// scan walks the top-level object of a document known to be valid JSON and
// records the known keys. It reports false when the document is not an
// object.
func (f *rawFields) scan(b []byte) bool {
	i := skipSpace(b, 0)
	if b[i] != '{' {
		return false
	}
	i++
	for {
		i = skipSpace(b, i)
		switch b[i] {
		case '}':
			return true
		case ',':
			i = skipSpace(b, i+1)
		}
		kEnd := stringEnd(b, i)
		key := b[i:kEnd]
		i = skipSpace(b, kEnd) + 1 // the colon
		i = skipSpace(b, i)
		vEnd := valueEnd(b, i)
		f.set(key, b[i:vEnd])
		i = vEnd
	}
}

func (f *rawFields) set(key, val []byte) {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		// An escaped key ("te\u0078t") names the same field.
		s, _ := decodeString(key)
		name = []byte(s)
	}
	switch string(name) { // no allocation: the compiler switches on the bytes
	case "text":
		f.text = val
	case "language":
		f.language = val
	case "output_format":
		f.format = val
	case "sample_rate":
		f.rate = val
	case "num_step":
		f.numStep = val
	case "expressiveness":
		f.expr = val
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index after the closing quote of the string at i.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// valueEnd returns the index after the value starting at i.
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default: // number, true, false, null
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return j
			}
			j++
		}
		return j
	}
}

func isNull(v []byte) bool { return v == nil || string(v) == "null" }

// decodeString returns the value of a JSON string. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does, so the text counted is the text spoken.
func decodeString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// number parses a JSON number; strings, booleans and containers are not.
func number(v []byte) (float64, bool) {
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// integer parses a JSON number with no fractional part within [lo, hi]:
// 24000 and 24000.0 are integers, 24000.5 and "24000" are not.
func integer(v []byte, lo, hi int) (int, bool) {
	f, ok := number(v)
	if !ok || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	return int(f), true
}

// WellFormedTag reports whether s has the shape of a BCP-47 language tag:
// a primary language subtag of 2-8 letters (or the x- / i- prefixes), then
// subtags of 1-8 letters or digits, separated by hyphens. Whether the
// engine speaks it is Prepare's question.
func WellFormedTag(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i, sub := range strings.Split(s, "-") {
		if len(sub) == 0 || len(sub) > 8 {
			return false
		}
		for j := 0; j < len(sub); j++ {
			c := sub[j] | 0x20 // ASCII lower case
			letter := c >= 'a' && c <= 'z'
			if !letter && !(i > 0 && sub[j] >= '0' && sub[j] <= '9') {
				return false
			}
		}
		if i == 0 && len(sub) == 1 && sub != "x" && sub != "i" && sub != "X" && sub != "I" {
			return false
		}
	}
	return true
}
