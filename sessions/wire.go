package sessions

import (
	"fmt"
	"time"

	"voicesvc/control"
	"voicesvc/synth"
)

// Wire is a realtime protocol's vocabulary: how its client's text messages
// read as commands, and how the session's events read to its client. The
// session does everything else, whatever the protocol: the socket and its
// WebSocket framing, contexts, the text buffer and the sentence cutter,
// voices, billing as text arrives and refunds, limits, cancel, the single
// writer and the idle timeout. So a dialect's socket (Cartesia's contexts,
// ElevenLabs' stream-input, Deepgram's Speak/Flush/Clear) is a Wire and a
// handshake, and holds no rule of its own.
//
// A session makes one Wire per socket (Deps.Wire), so a Wire may keep the
// socket's state: the voice and format its URL named, a sequence number.
// Parse and Hello are called by one goroutine at a time. Nil: the native
// protocol (docs/realtime.md).
type Wire interface {
	// Hello appends the session's first message, written before anything
	// else (Deepgram's Metadata); returning b unchanged sends none.
	Hello(b []byte) []byte
	// Parse reads one client text message (valid UTF-8, at most
	// Config.MaxFrame bytes) and appends the commands it carries to cmds,
	// in order. An error refuses the message (*Refusal, or a field's
	// *control.Error from the core's parsers: its code and message, no
	// context) and the session goes on; commands appended before the error
	// are dropped.
	Parse(b []byte, cmds []Command) ([]Command, error)
	// Encoder returns the writer of one context's events, called when the
	// context opens (its voice found, its first text billed).
	Encoder(c *ContextInfo) Encoder
	// AppendError appends an error message: a refused message or context
	// (fatal false), or the session's end (fatal true, a close follows).
	// code is voicesvc's (control's codes, or the Code* constants);
	// contextID is "" when no context is concerned.
	AppendError(b []byte, contextID, code, msg string, fatal bool) []byte
	// AppendSessionEnded appends the last message of a session that ends
	// normally, for reason "client_request" (EndSession) or "idle";
	// returning b unchanged sends none.
	AppendSessionEnded(b []byte, reason string) []byte
}

// Encoder writes one context's events. Each method appends the message to
// b and returns it; returning b unchanged sends nothing for that event.
// Audio and Words are called by the context's runner (one at a time, in
// order: a sentence's Words before the audio that holds their starts), the
// others with the session's lock held; Cancelled may run while the runner
// is inside Audio or Words, so state the two share needs its own care.
type Encoder interface {
	// Started: the context opened.
	Started(b []byte) []byte
	// Audio: one chunk of sentence's audio, in the context's format. It
	// returns the text message (b) and the binary one (bin, after the
	// text message with nothing between); either may be left empty.
	Audio(b, bin []byte, a *Audio) (text, binary []byte)
	// Words: the words whose start is in the audio that follows. text is
	// the sentence, which starts at code point at of the context's text
	// (Word.CharStart/CharEnd count from the context's start).
	Words(b []byte, sentence int, text string, at int, words []synth.Word) []byte
	// SentenceDone: sentence's audio has all been sent.
	SentenceDone(b []byte, sentence int, text string, dur float64) []byte
	// Flushed: the audio of the text before a Flush has all been sent.
	Flushed(b []byte, flushID string) []byte
	// Done: the context ended after its last audio.
	Done(b []byte, d *Done) []byte
	// Cancelled: a Cancel (or Clear) stopped it; nothing of it follows.
	Cancelled(b []byte, c *Cancelled) []byte
	// Failed: the synthesis failed; code is voicesvc's, retryAfter > 0
	// the seconds a refusal for capacity asks to wait.
	Failed(b []byte, code string, retryAfter int, completed int, trace string) []byte
}

// ContextInfo describes a context as it opens.
type ContextInfo struct {
	ID         string
	Voice      *control.Voice
	Format     string // codec.Format
	SampleRate int
	Timestamps bool // word timings were asked and the engine has them
	Trace      string
}

// Audio is one chunk of a context's audio.
type Audio struct {
	Sentence, Chunk int
	Duration        float64 // seconds
	Bytes           []byte  // in the context's format; only valid during the call
}

// Done is a finished context's summary.
type Done struct {
	Sentences              int
	AudioS                 float64
	FirstAudioMS, Generate float64 // ms
	Trace                  string
}

// Cancelled is a cancel receipt (docs/realtime.md#task_cancelled).
type Cancelled struct {
	Completed, Dropped int
	AudioSentS         float64
	SpokenUntil        int // code points of the context's text wholly heard
	Trace              string
}

// CommandKind is what a client message asks of the session.
type CommandKind uint8

const (
	// Open opens Context with Open's voice and options and Text; a context
	// already open under that id is refused (context_already_exists).
	Open CommandKind = iota + 1
	// Append adds Text to the open Context; an unknown one is refused.
	Append
	// Speak is Open when no context of that id is open, else Append.
	Speak
	// Flush renders Context's waiting text now, and answers Flushed with
	// FlushID once the audio of everything before it is sent (at once
	// when none is waiting). No open context: Flushed at once.
	Flush
	// Cancel stops Context at once (the cancel receipt); with IfOpen, an
	// unknown context is no error and answers nothing.
	Cancel
	// Clear cancels every open context.
	Clear
	// Reply sends Text as a text message, in order with the others.
	Reply
	// EndSession ends the session: at once (session_ended), or with
	// Graceful once every open context has finished its text.
	EndSession
)

// Command is one thing a client message asks.
type Command struct {
	Kind    CommandKind
	Context string
	Text    string
	// Finalize: no more text comes for this context; it ends (Done) once
	// its text is spoken.
	Finalize bool
	// Open is how an Open or Speak opens its context.
	Open    *OpenParams
	FlushID string
	IfOpen  bool
	// Graceful: EndSession waits for the open contexts.
	Graceful bool
}

// OpenParams is what a context opens with. Options were validated by the
// core's rules (synth.Rules); Options.Text is ignored (Command.Text).
type OpenParams struct {
	Voice   string // id, workspace alias or catalog alias
	Options synth.Options
	Buffer  Buffer
}

// Buffer is how a context holds text until it is spoken. By default each
// sentence is spoken as soon as its end is certain and a partial one after
// IdleFlush of silence.
type Buffer struct {
	// IdleFlush: how long a partial sentence waits for more text; 0 the
	// session's default (Config.IdleFlush), negative: until Flush or
	// Finalize.
	IdleFlush time.Duration
	// Immediate speaks every piece of text as it arrives.
	Immediate bool
	// Hold speaks nothing before Flush or Finalize (no sentence cutting).
	Hold bool
	// Schedule (ElevenLabs' chunk_length_schedule): instead of sentence
	// ends, the text is spoken once Schedule[k] characters wait, k the
	// number of pieces spoken so far (the last entry repeats), cut after
	// the last word that fits.
	Schedule []int
}

// Refusal refuses one client message with an error message (non-fatal).
type Refusal struct {
	Context, Code, Message string
}

func (e *Refusal) Error() string { return e.Code + ": " + e.Message }

// Invalid is the invalid_message refusal.
func Invalid(contextID, format string, args ...any) *Refusal {
	return &Refusal{Context: contextID, Code: CodeInvalidMessage, Message: fmt.Sprintf(format, args...)}
}

// asRefusal is err as a refusal: a *Refusal as it is; a field's
// *control.Error keeps the codes the protocols name for a field and is
// invalid_message otherwise (its message names the field).
func asRefusal(contextID string, err error) *Refusal {
	if r, ok := err.(*Refusal); ok {
		return r
	}
	return refusal(contextID, err)
}
