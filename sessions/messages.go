package sessions

import (
	"strings"
	"time"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
)

// Error frame codes (docs/realtime.md#errors). A code the HTTP routes share
// is control's constant; these are the WebSocket's own.
const (
	CodeContextExists   = "context_already_exists"
	CodeVoiceNotFound   = "voice_not_found"
	CodeInvalidMessage  = "invalid_message"
	CodeTooManyContexts = "too_many_contexts"
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

// refusal turns a field's *control.Error (from synth) into an error frame.
// The codes the protocol names for a field pass through; any other refusal
// of a field, of the wrong type or out of range, is invalid_message, whose
// message names the field.
func refusal(contextID string, err error) *Refusal {
	e := control.AsError(err)
	code := CodeInvalidMessage
	switch e.Code {
	case control.ETextTooLong, control.ETextRequired, control.EInvalidLanguage:
		code = e.Code
	}
	return &Refusal{Context: contextID, Code: code, Message: e.Message}
}

// native is the native protocol's Wire (docs/realtime.md): task_start,
// task_continue, task_cancel and session_end in; task_started, audio_chunk
// + binary pairs, word_timestamps, sentence_done, task_done,
// task_cancelled, task_failed, error and session_ended out (frames.go).
type native struct{}

// Native is the native protocol's Wire, the default of Deps.Wire.
func Native() Wire { return native{} }

func (native) Hello(b []byte) []byte { return b }

// Parse reads a message through the parser every transport uses.
func (native) Parse(b []byte, cmds []Command) ([]Command, error) {
	f, err := synth.Scan(b)
	if err != nil {
		return cmds, Invalid("", "message is not a JSON object")
	}
	typ, ok, err := synth.String("type", f.Type)
	if err != nil {
		return cmds, refusal("", err)
	}
	if !ok {
		return cmds, Invalid("", "field type is required")
	}
	var c Command
	switch typ {
	case "task_start":
		err = parseStart(&f, &c)
	case "task_continue":
		err = parseContinue(&f, &c)
	case "task_cancel":
		c.Kind = Cancel
		c.Context, err = contextID(&f)
	case "session_end":
		c.Kind = EndSession
	default:
		return cmds, Invalid("", "unknown message type %q", typ)
	}
	if err != nil {
		return cmds, err
	}
	return append(cmds, c), nil
}

// contextID reads the context_id every message but session_end names.
func contextID(f *synth.Fields) (string, error) {
	id, ok, err := synth.String("context_id", f.ContextID)
	if err != nil {
		return "", refusal("", err)
	}
	if !ok || id == "" {
		return "", Invalid("", "field context_id is required")
	}
	if utf8.RuneCountInString(id) > maxClientIDChars {
		// Not echoed: the refusal would repeat what it refuses.
		return "", Invalid("", "field context_id must be at most %d characters", maxClientIDChars)
	}
	return id, nil
}

// parseStart reads task_start: its ids, then the shared fields (synth),
// then the WebSocket's own. What needs session state (the language among
// the engines', duplicates, open contexts, the voice) is the session's.
func parseStart(f *synth.Fields, c *Command) error {
	id, err := contextID(f)
	if err != nil {
		return err
	}
	c.Kind, c.Context = Open, id
	fail := func(err error) error { return refusal(id, err) }
	voiceID, ok, err := synth.String("voice_id", f.VoiceID)
	if err != nil {
		return fail(err)
	} else if !ok || voiceID == "" {
		return Invalid(id, "field voice_id is required")
	}
	p := &OpenParams{Voice: voiceID}
	if p.Options, err = f.Options(startRules); err != nil {
		return fail(err)
	}
	c.Text, p.Options.Text = p.Options.Text, ""
	if c.Finalize, err = synth.Bool("finalize", f.Finalize); err != nil {
		return fail(err)
	}
	guidance := defaultGuidanceScale
	if v, ok, err := synth.Number("guidance_scale", f.GuidanceScale, 0, 10); err != nil {
		return fail(err)
	} else if ok {
		guidance = v
	}
	p.Options.GuidanceScale = &guidance
	if v, ok, err := synth.Number("length_scale", f.LengthScale, 0, 5); err != nil {
		return fail(err)
	} else if ok {
		if v == 0 {
			return Invalid(id, "field length_scale must be greater than 0 and at most 5")
		}
		// length_scale is a duration factor, honoured from 0.2 (speed 5,
		// the engines' fastest); below that it is clamped to 0.2.
		speed := 1 / max(v, 0.2)
		p.Options.Speed = &speed
	}
	if v, ok, err := synth.Integer("idle_flush_ms", f.IdleFlushMS); err != nil {
		return fail(err)
	} else if ok {
		p.Buffer.IdleFlush = time.Duration(min(max(v, 200), 5000)) * time.Millisecond
	}
	if c.Finalize && strings.TrimSpace(c.Text) == "" {
		return &Refusal{id, control.ETextRequired, "text is required with finalize"}
	}
	c.Open = p
	return nil
}

// parseContinue reads task_continue.
func parseContinue(f *synth.Fields, c *Command) error {
	id, err := contextID(f)
	if err != nil {
		return err
	}
	c.Kind, c.Context = Append, id
	if c.Text, _, err = synth.String("text", f.Text); err != nil {
		return refusal(id, err)
	}
	if c.Finalize, err = synth.Bool("finalize", f.Finalize); err != nil {
		return refusal(id, err)
	}
	return nil
}
