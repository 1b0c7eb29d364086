package sessions

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/langtag"
	"voicesvc/synth"
)

// Error frame codes (docs/realtime.md#errors). A code the HTTP routes share
// is control's constant; these are the WebSocket's own.
const (
	codeContextExists   = "context_already_exists"
	codeVoiceNotFound   = "voice_not_found"
	codeInvalidMessage  = "invalid_message"
	codeTooManyContexts = "too_many_contexts"
)

// Session defaults of task_start (docs/realtime.md#task_start).
const (
	// maxTaskStartChars: a task_start text of 10,000 characters or more is
	// refused, one less than the HTTP limit.
	maxTaskStartChars    = synth.MaxTextChars - 1
	defaultGuidanceScale = 2.0
	defaultLanguage      = "en"
	// maxClientIDChars bounds the ids a client chooses and the server
	// echoes (context_id is in every frame of its context, audio_chunk
	// included): a longer one would multiply what the server sends.
	maxClientIDChars = 256
)

// startRules are task_start's synthesis fields under the rules every
// transport shares (synth), with the WebSocket's own: text may come later,
// any PCM format or Opus, and an output_format it does not offer means the
// default (the client reads the real one from task_started).
var startRules = synth.Rules{
	Format: codec.F32LE,
	Formats: []codec.Format{codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE,
		codec.MuLaw, codec.ALaw, codec.Opus},
	CoerceFormat:    true,
	TextOptional:    true,
	MaxTextChars:    maxTaskStartChars,
	DefaultLanguage: defaultLanguage,
	Timestamps:      true,
}

// msgError rejects one client message; fatal errors end the session.
type msgError struct {
	contextID, code, msg string
}

func (e *msgError) Error() string { return e.code + ": " + e.msg }

func invalid(contextID, format string, args ...any) *msgError {
	return &msgError{contextID: contextID, code: codeInvalidMessage, msg: fmt.Sprintf(format, args...)}
}

// refusal turns a field's *control.Error (from synth) into an error frame.
// The codes the protocol names for a field pass through; any other refusal
// of a field, of the wrong type or out of range, is invalid_message, whose
// message names the field.
func refusal(contextID string, err error) *msgError {
	e := control.AsError(err)
	code := codeInvalidMessage
	switch e.Code {
	case control.ETextTooLong, control.ETextRequired, control.EInvalidLanguage:
		code = e.Code
	}
	return &msgError{contextID: contextID, code: code, msg: e.Message}
}

// parseMessage reads a client message through the parser every transport
// uses, and its type.
func parseMessage(b []byte) (synth.Fields, string, *msgError) {
	f, err := synth.Scan(b)
	if err != nil {
		return f, "", invalid("", "message is not a JSON object")
	}
	typ, ok, err := synth.String("type", f.Type)
	if err != nil {
		return f, "", refusal("", err)
	}
	if !ok {
		return f, "", invalid("", "field type is required")
	}
	return f, typ, nil
}

// contextID reads the context_id every message but session_end names.
func contextID(f *synth.Fields) (string, *msgError) {
	id, ok, err := synth.String("context_id", f.ContextID)
	if err != nil {
		return "", refusal("", err)
	}
	if !ok || id == "" {
		return "", invalid("", "field context_id is required")
	}
	if utf8.RuneCountInString(id) > maxClientIDChars {
		// Not echoed: the refusal would repeat what it refuses.
		return "", invalid("", "field context_id must be at most %d characters", maxClientIDChars)
	}
	return id, nil
}

// startParams is a validated task_start.
type startParams struct {
	contextID, voiceID string
	textChars          int
	finalize           bool
	opts               synth.Options // text, language, format, rate, engine parameters
	idleFlush          time.Duration
}

// parseStart checks the fields of task_start: its ids, then the shared
// fields (synth), then the WebSocket's own. Limits that need session state
// (duplicates, open contexts, the voice) are the caller's.
func parseStart(f *synth.Fields, defaultIdleFlush time.Duration, languages []string) (*startParams, *msgError) {
	id, e := contextID(f)
	if e != nil {
		return nil, e
	}
	p := &startParams{contextID: id, idleFlush: defaultIdleFlush}
	fail := func(err error) (*startParams, *msgError) { return nil, refusal(id, err) }
	voiceID, ok, err := synth.String("voice_id", f.VoiceID)
	if err != nil {
		return fail(err)
	} else if !ok || voiceID == "" {
		return nil, invalid(id, "field voice_id is required")
	}
	p.voiceID = voiceID
	if p.opts, err = f.Options(startRules); err != nil {
		return fail(err)
	}
	// The language is checked before the voice is looked up (Prepare checks
	// it again, by the same rule, with the voice).
	if _, ok := langtag.Match(p.opts.Language, languages); !ok {
		return nil, &msgError{id, control.EInvalidLanguage, fmt.Sprintf("language %q is not supported", p.opts.Language)}
	}
	if p.finalize, err = synth.Bool("finalize", f.Finalize); err != nil {
		return fail(err)
	}
	guidance := defaultGuidanceScale
	if v, ok, err := synth.Number("guidance_scale", f.GuidanceScale, 0, 10); err != nil {
		return fail(err)
	} else if ok {
		guidance = v
	}
	p.opts.GuidanceScale = &guidance
	if v, ok, err := synth.Number("length_scale", f.LengthScale, 0, 5); err != nil {
		return fail(err)
	} else if ok {
		if v == 0 {
			return nil, invalid(id, "field length_scale must be greater than 0 and at most 5")
		}
		// length_scale is a duration factor, honoured from 0.2 (speed 5,
		// the engines' fastest); below that it is clamped to 0.2.
		speed := 1 / max(v, 0.2)
		p.opts.Speed = &speed
	}
	if v, ok, err := synth.Integer("idle_flush_ms", f.IdleFlushMS); err != nil {
		return fail(err)
	} else if ok {
		p.idleFlush = time.Duration(min(max(v, 200), 5000)) * time.Millisecond
	}
	p.textChars = int(control.CountChars(p.opts.Text))
	if p.finalize && strings.TrimSpace(p.opts.Text) == "" {
		return nil, &msgError{id, control.ETextRequired, "text is required with finalize"}
	}
	return p, nil
}

// continueParams is a validated task_continue.
type continueParams struct {
	contextID, text string
	textChars       int
	finalize        bool
}

func parseContinue(f *synth.Fields) (*continueParams, *msgError) {
	id, e := contextID(f)
	if e != nil {
		return nil, e
	}
	p := &continueParams{contextID: id}
	var err error
	if p.text, _, err = synth.String("text", f.Text); err != nil {
		return nil, refusal(id, err)
	}
	if p.finalize, err = synth.Bool("finalize", f.Finalize); err != nil {
		return nil, refusal(id, err)
	}
	p.textChars = int(control.CountChars(p.text))
	return p, nil
}
