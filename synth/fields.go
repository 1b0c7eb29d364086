package synth

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"voicesvc/control"
)

// Fields is a JSON request object split into the raw values of the keys any
// transport knows; a nil value is an absent key. Every transport reads its
// body through Scan: speak and SSE bodies, and the WebSocket's messages,
// which add their own keys (type, context_id, ...). Keys match exactly
// (encoding/json would also take "Text"); unknown keys are ignored; of
// duplicate keys the last wins, as in encoding/json.
type Fields struct {
	// Synthesis fields every transport shares (Options).
	Text, Language, OutputFormat, SampleRate, NumStep, Expressiveness, Speed, Timestamps []byte
	// WebSocket message fields (docs/realtime.md).
	Type, ContextID, VoiceID, Finalize, GuidanceScale, LengthScale, IdleFlushMS []byte
}

// Scan checks that body is one JSON object and records its known keys.
// Its error is invalid_json. It allocates nothing for a body without
// escaped keys: the values are slices of body.
func Scan(body []byte) (Fields, error) {
	var f Fields
	// json.Valid allocates nothing and lets the walk below assume a
	// well-formed document.
	if !json.Valid(body) {
		return f, control.Errorf(control.EInvalidJSON, "the body is not valid JSON")
	}
	if !f.scan(body) {
		return f, control.Errorf(control.EInvalidJSON, "the body must be a JSON object")
	}
	return f, nil
}

// scan walks the top-level object of a document known to be valid JSON and
// records the known keys. It reports false when the document is not an
// object.
func (f *Fields) scan(b []byte) bool {
	return walkObject(b, f.set)
}

// walkObject calls fn with each key (its unescaped name) and raw value of
// the top-level object of b, a document known to be valid JSON, in order.
// It reports false when the document is not an object.
func walkObject(b []byte, fn func(name, val []byte)) bool {
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
		fn(keyName(key), b[i:vEnd])
		i = vEnd
	}
}

// keyName is the name of a quoted key: an escaped key ("te\u0078t") names
// the same field as its plain spelling.
func keyName(key []byte) []byte {
	name := key[1 : len(key)-1]
	if bytes.IndexByte(name, '\\') >= 0 {
		s, _ := decodeString(key)
		name = []byte(s)
	}
	return name
}

func (f *Fields) set(name, val []byte) {
	switch string(name) { // no allocation: the compiler switches on the bytes
	case "text":
		f.Text = val
	case "language":
		f.Language = val
	case "output_format":
		f.OutputFormat = val
	case "sample_rate":
		f.SampleRate = val
	case "num_step":
		f.NumStep = val
	case "expressiveness":
		f.Expressiveness = val
	case "speed":
		f.Speed = val
	case "timestamps":
		f.Timestamps = val
	case "type":
		f.Type = val
	case "context_id":
		f.ContextID = val
	case "voice_id":
		f.VoiceID = val
	case "finalize":
		f.Finalize = val
	case "guidance_scale":
		f.GuidanceScale = val
	case "length_scale":
		f.LengthScale = val
	case "idle_flush_ms":
		f.IdleFlushMS = val
	}
}

// The typed readers below take one raw value. Absent and JSON null read as
// absent (ok false, no error); a value of the wrong type is an error with
// code invalid_request naming the field, for fields whose rules have no code
// of their own.

// String reads a JSON string field.
func String(name string, raw []byte) (s string, ok bool, err error) {
	if IsNull(raw) {
		return "", false, nil
	}
	if s, ok = decodeString(raw); !ok {
		return "", false, control.Errorf(control.EInvalidRequest, "%s must be a string", name)
	}
	return s, true, nil
}

// Bool reads a JSON boolean field; absent is false.
func Bool(name string, raw []byte) (bool, error) {
	switch {
	case IsNull(raw):
		return false, nil
	case string(raw) == "true":
		return true, nil
	case string(raw) == "false":
		return false, nil
	}
	return false, control.Errorf(control.EInvalidRequest, "%s must be a boolean", name)
}

// Number reads a JSON number field within [lo, hi]; strings are refused
// ("0.5" is not a number).
func Number(name string, raw []byte, lo, hi float64) (v float64, ok bool, err error) {
	if IsNull(raw) {
		return 0, false, nil
	}
	v, ok = number(raw)
	if !ok || v < lo || v > hi {
		return 0, false, control.Errorf(control.EInvalidRequest, "%s must be a number from %g to %g", name, lo, hi)
	}
	return v, true, nil
}

// Integer reads a JSON number with no fractional part (24000.0 is one).
func Integer(name string, raw []byte) (v int, ok bool, err error) {
	if IsNull(raw) {
		return 0, false, nil
	}
	v, ok = integer(raw, math.MinInt32, math.MaxInt32)
	if !ok {
		return 0, false, control.Errorf(control.EInvalidRequest, "%s must be an integer", name)
	}
	return v, true, nil
}

// IsNull: an absent key or JSON null.
func IsNull(v []byte) bool { return v == nil || string(v) == "null" }

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
