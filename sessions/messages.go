package sessions

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"voicesvc/codec"
)

// Error frame codes (docs/realtime.md).
const (
	codeContextExists    = "context_already_exists"
	codeVoiceNotFound    = "voice_not_found"
	codeVoiceNotAllowed  = "voice_not_allowed"
	codeTextTooLong      = "text_too_long"
	codeTextRequired     = "text_required"
	codeInvalidLanguage  = "invalid_language"
	codeInsufficient     = "insufficient_credits"
	codeInvalidMessage   = "invalid_message"
	codeTooManyContexts  = "too_many_contexts"
	codeInternal         = "internal"
	codeUnavailable      = "unavailable"
	codeShuttingDown     = "shutting_down"
	codeUnauthorized     = "unauthorized"
	defaultSampleRate    = 24000 // native 24000
	opusRate             = 48000
	maxTaskStartChars    = 10000 // "10,000 characters or more" is refused
	defaultNumStep       = 32
	defaultGuidanceScale = 2.0
)

// msgError rejects one client message; fatal errors end the session.
type msgError struct {
	contextID, code, msg string
}

func (e *msgError) Error() string { return e.code + ": " + e.msg }

func invalid(contextID, format string, args ...any) *msgError {
	return &msgError{contextID: contextID, code: codeInvalidMessage, msg: fmt.Sprintf(format, args...)}
}

// message is a client message split into its raw fields. A map, not a
// struct: encoding/json matches struct fields case-insensitively and the
// protocol's field names are exact.
type message map[string]json.RawMessage

func parseMessage(b []byte) (message, string, *msgError) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, "", invalid("", "message is not a JSON object")
	}
	typ, ok, err := m.str("type")
	if err != nil {
		return nil, "", err
	}
	if !ok {
		return nil, "", invalid("", "field type is required")
	}
	return m, typ, nil
}

// isNull: JSON null counts as an absent field.
func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func (m message) str(field string) (string, bool, *msgError) {
	raw := m[field]
	if isNull(raw) {
		return "", false, nil
	}
	var s string
	if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, invalid("", "field %s must be a string", field)
	}
	return s, true, nil
}

func (m message) boolean(field string) (bool, *msgError) {
	switch raw := m[field]; {
	case isNull(raw):
		return false, nil
	case string(raw) == "true":
		return true, nil
	case string(raw) == "false":
		return false, nil
	}
	return false, invalid("", "field %s must be a boolean", field)
}

// number accepts JSON numbers only: "24000" (a string) is refused by the
// protocol (docs/realtime.md).
func (m message) number(field string) (float64, bool, *msgError) {
	raw := m[field]
	if isNull(raw) {
		return 0, false, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return 0, false, invalid("", "field %s must be a JSON number", field)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) {
		return 0, false, invalid("", "field %s must be a JSON number", field)
	}
	return v, true, nil
}

func (m message) integer(field string) (int, bool, *msgError) {
	v, ok, err := m.number(field)
	if err != nil || !ok {
		return 0, ok, err
	}
	if v != math.Trunc(v) || math.Abs(v) > 1<<31 {
		return 0, false, invalid("", "field %s must be an integer", field)
	}
	return int(v), true, nil
}

// startParams is a validated task_start.
type startParams struct {
	contextID, voiceID, text string
	textChars                int
	finalize                 bool
	language                 string
	format                   codec.Format
	rate                     int // effective output rate
	numStep                  int
	expressiveness           *float64
	guidance                 float64
	lengthScale              float64 // 0: not given
	idleFlush                time.Duration
}

// parseStart checks the fields of task_start in the documented order (docs/realtime.md).
// Limits that need session state (duplicates, open contexts, the voice)
// are the caller's.
func parseStart(m message, defaultIdleFlush time.Duration, languages []string) (*startParams, *msgError) {
	p := &startParams{language: "en", format: codec.F32LE, rate: defaultSampleRate,
		numStep: defaultNumStep, guidance: defaultGuidanceScale, idleFlush: defaultIdleFlush}
	var ok bool
	var err *msgError
	if p.contextID, ok, err = m.str("context_id"); err != nil {
		return nil, err
	} else if !ok || p.contextID == "" {
		return nil, invalid("", "field context_id is required")
	}
	// From here on errors name the context.
	fail := func(e *msgError) (*startParams, *msgError) {
		e.contextID = p.contextID
		return nil, e
	}
	if p.voiceID, ok, err = m.str("voice_id"); err != nil {
		return fail(err)
	} else if !ok || p.voiceID == "" {
		return fail(invalid("", "field voice_id is required"))
	}
	if p.text, _, err = m.str("text"); err != nil {
		return fail(err)
	}
	if p.finalize, err = m.boolean("finalize"); err != nil {
		return fail(err)
	}
	if lang, ok, err := m.str("language"); err != nil {
		return fail(err)
	} else if ok {
		if !supportedLanguage(lang, languages) {
			return fail(&msgError{code: codeInvalidLanguage, msg: fmt.Sprintf("language %q is not supported", lang)})
		}
		p.language = lang
	}
	// An invalid output_format, whatever its type, falls back to the
	// default (docs/realtime.md): the client learns the real one from
	// task_started.
	if s, _, _ := m.str("output_format"); s != "" {
		if f, ok := codec.ParseFormat(s); ok && (f.IsPCM() || f == codec.Opus) {
			p.format = f
		}
	}
	if v, ok, err := m.integer("sample_rate"); err != nil {
		return fail(err)
	} else if ok {
		if v < 8000 || v > 48000 {
			return fail(invalid("", "field sample_rate must be 8000-48000"))
		}
		p.rate = v
	}
	if p.format == codec.Opus {
		p.rate = opusRate
	}
	if v, ok, err := m.integer("num_step"); err != nil {
		return fail(err)
	} else if ok {
		if v < 1 || v > 32 {
			return fail(invalid("", "field num_step must be 1-32"))
		}
		p.numStep = v
	}
	if v, ok, err := m.number("expressiveness"); err != nil {
		return fail(err)
	} else if ok {
		if v < 0 || v > 1 {
			return fail(invalid("", "field expressiveness must be 0-1"))
		}
		p.expressiveness = &v
	}
	if v, ok, err := m.number("guidance_scale"); err != nil {
		return fail(err)
	} else if ok {
		if v < 0 || v > 10 {
			return fail(invalid("", "field guidance_scale must be 0-10"))
		}
		p.guidance = v
	}
	if v, ok, err := m.number("length_scale"); err != nil {
		return fail(err)
	} else if ok {
		if v <= 0 || v > 5 {
			return fail(invalid("", "field length_scale must be greater than 0 and at most 5"))
		}
		p.lengthScale = v
	}
	if v, ok, err := m.integer("idle_flush_ms"); err != nil {
		return fail(err)
	} else if ok {
		p.idleFlush = time.Duration(min(max(v, 200), 5000)) * time.Millisecond
	}
	p.textChars = utf8.RuneCountInString(p.text)
	if p.textChars >= maxTaskStartChars {
		return fail(&msgError{code: codeTextTooLong, msg: "text must be under 10000 characters"})
	}
	if p.finalize && strings.TrimSpace(p.text) == "" {
		return fail(&msgError{code: codeTextRequired, msg: "text is required with finalize"})
	}
	return p, nil
}

// continueParams is a validated task_continue.
type continueParams struct {
	contextID, text string
	textChars       int
	finalize        bool
}

func parseContinue(m message) (*continueParams, *msgError) {
	p := &continueParams{}
	var ok bool
	var err *msgError
	if p.contextID, ok, err = m.str("context_id"); err != nil {
		return nil, err
	} else if !ok || p.contextID == "" {
		return nil, invalid("", "field context_id is required")
	}
	if p.text, _, err = m.str("text"); err != nil {
		err.contextID = p.contextID
		return nil, err
	}
	if p.finalize, err = m.boolean("finalize"); err != nil {
		err.contextID = p.contextID
		return nil, err
	}
	p.textChars = utf8.RuneCountInString(p.text)
	return p, nil
}

// supportedLanguage accepts a BCP-47 tag when the engine lists it or its
// primary subtag ("en-US" for an engine that speaks "en").
func supportedLanguage(tag string, languages []string) bool {
	if tag == "" || len(tag) > 35 {
		return false
	}
	for _, part := range strings.Split(tag, "-") {
		if part == "" || len(part) > 8 {
			return false
		}
		for i := 0; i < len(part); i++ {
			c := part[i] | 0x20
			if !(c >= 'a' && c <= 'z' || part[i] >= '0' && part[i] <= '9') {
				return false
			}
		}
	}
	primary, _, _ := strings.Cut(tag, "-")
	for _, l := range languages {
		if strings.EqualFold(l, tag) || strings.EqualFold(l, primary) {
			return true
		}
	}
	return false
}
