package cartesia

import (
	"strconv"
	"time"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
)

// wire is Cartesia's socket vocabulary over the session engine (package
// sessions), one per socket. Client messages (synth.ParseCartesia):
//
//	generation  {"context_id", "transcript", "continue", "flush",
//	             "max_buffer_delay_ms", "voice", "output_format", ...}
//	cancel      {"context_id", "cancel": true}
//
// A generation message opens its context (the voice and format of its
// first message hold for the context) or adds its transcript to it;
// continue false (or absent) is the context's last input: it ends with done
// once its text is spoken. flush speaks what waits now and answers
// flush_done with the context's flush count (flush_id, from 1). cancel
// stops the context at once; its unsynthesized text is refunded and nothing
// of it follows (no message: the official client stops reading a cancelled
// context). max_buffer_delay_ms is how long text waits for a sentence end:
// 0 speaks each piece as it comes, absent is Cartesia's 3000.
//
// Server messages are events.go's: chunk (base64 audio, step_time the ms
// since the context's previous chunk), timestamps (add_timestamps), flush_done,
// done, error. A refused message answers an error event with its
// context_id and the socket goes on.
type wire struct {
	requestID string
	// flushes counts each open context's flushes (flush_id); an entry
	// goes when its context's last input or cancel arrives.
	flushes map[string]int
}

func newWire(requestID string) *wire {
	return &wire{requestID: requestID, flushes: make(map[string]int)}
}

var _ sessions.Wire = (*wire)(nil)

// maxFlushCounts bounds flushes: a client that opens contexts and never
// ends them loses their flush numbering past it, nothing else.
const maxFlushCounts = 1024

func (w *wire) Hello(b []byte) []byte { return b }

func (w *wire) Parse(b []byte, cmds []sessions.Command) ([]sessions.Command, error) {
	in, err := synth.ParseCartesia(b, synth.CartesiaSocket)
	if err != nil {
		e := control.AsError(err)
		return cmds, &sessions.Refusal{Context: in.ContextID, Code: e.Code, Message: e.Message}
	}
	id := in.ContextID
	if in.Cancel {
		delete(w.flushes, id)
		return append(cmds, sessions.Command{Kind: sessions.Cancel, Context: id, IfOpen: true}), nil
	}
	last := !in.Continue
	cmds = append(cmds, sessions.Command{Kind: sessions.Speak, Context: id, Text: in.Options.Text,
		Finalize: last && !in.Flush, Open: &sessions.OpenParams{Voice: in.Voice, Options: in.Options, Buffer: buffer(in.MaxBufferDelayMS)}})
	if in.Flush {
		n := w.flushes[id] + 1
		if len(w.flushes) < maxFlushCounts || n > 1 {
			w.flushes[id] = n
		}
		cmds = append(cmds, sessions.Command{Kind: sessions.Flush, Context: id, FlushID: strconv.Itoa(n)})
		if last {
			cmds = append(cmds, sessions.Command{Kind: sessions.Append, Context: id, Finalize: true})
		}
	}
	if last {
		delete(w.flushes, id)
	}
	return cmds, nil
}

// buffer maps max_buffer_delay_ms onto the session's buffering: 0 speaks
// every piece as it arrives; otherwise sentences are spoken as their ends
// are certain and a partial one after the delay (Cartesia's default when
// absent).
func buffer(delayMS int) sessions.Buffer {
	switch {
	case delayMS == 0:
		return sessions.Buffer{Immediate: true}
	case delayMS < 0:
		delayMS = synth.CartesiaDefaultBufferDelayMS
	}
	return sessions.Buffer{IdleFlush: time.Duration(delayMS) * time.Millisecond}
}

func (w *wire) Encoder(c *sessions.ContextInfo) sessions.Encoder {
	return &encoder{w: w, id: c.ID, last: time.Now()}
}

// AppendError is the error event of a refused message (or the session's
// end, fatal), with the context it concerns.
func (w *wire) AppendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	return appendErrorEvent(b, contextID, sessionError(code, msg), w.requestID)
}

func (w *wire) AppendSessionEnded(b []byte, reason string) []byte { return b }

// sessionError is a session's code and message as an error (its status:
// statusOf).
func sessionError(code, msg string) *control.Error { return control.Errorf(code, "%s", msg) }

// encoder writes one context's events. Audio and Words run on the
// context's runner, one at a time; the others under the session's lock.
type encoder struct {
	w    *wire
	id   string
	last time.Time // when the previous chunk was written: step_time
}

func (e *encoder) Started(b []byte) []byte { return b }

func (e *encoder) Audio(b, bin []byte, a *sessions.Audio) ([]byte, []byte) {
	now := time.Now()
	step := float64(now.Sub(e.last)) / float64(time.Millisecond)
	e.last = now
	return appendChunk(b, e.id, a.Bytes, step), bin
}

func (e *encoder) Words(b []byte, _ int, _ string, _ int, words []synth.Word) []byte {
	return appendTimestamps(b, e.id, words)
}

func (e *encoder) SentenceDone(b []byte, _ int, _ string, _ float64) []byte { return b }

func (e *encoder) Flushed(b []byte, flushID string) []byte {
	n, _ := strconv.Atoi(flushID)
	return appendFlushDone(b, e.id, n)
}

func (e *encoder) Done(b []byte, _ *sessions.Done) []byte { return appendDone(b, e.id) }

func (e *encoder) Cancelled(b []byte, _ *sessions.Cancelled) []byte { return b }

func (e *encoder) Failed(b []byte, code string, _, _ int, _ string) []byte {
	return appendErrorEvent(b, e.id, sessionError(code, "synthesis failed: "+code), e.w.requestID)
}
