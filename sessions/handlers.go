package sessions

import (
	"errors"
	"fmt"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/langtag"
	"voicesvc/synth"
)

// findLocked returns the open task with that context_id.
func (s *session) findLocked(id string) *task {
	for _, t := range s.tasks {
		if t.id == id {
			return t
		}
	}
	return nil
}

// command carries out one command of a client message; end reports that
// the session is over.
func (s *session) command(c *Command) (end bool, err error) {
	switch c.Kind {
	case Open:
		return s.open(c)
	case Append:
		return s.appendText(c)
	case Speak:
		s.mu.Lock()
		open := s.findLocked(c.Context) != nil
		s.mu.Unlock()
		if open {
			return s.appendText(c)
		}
		return s.open(c)
	case Flush:
		s.flush(c)
	case Cancel:
		s.cancel(c)
	case Clear:
		s.clear()
	case Reply:
		f := getFrame()
		f.hdr = append(f.hdr, c.Text...)
		s.mu.Lock()
		s.pushLocked(f, false) // behind what is queued: in order with the audio
		s.mu.Unlock()
	case EndSession:
		if c.Graceful {
			return s.endWhenDone()
		}
		return true, s.finish(disconnectNormal, s.sessionEndedFrame("client_request"), nil)
	default:
		return true, s.fatal("", control.EInternal, "internal error", disconnectInternal, fmt.Errorf("sessions: unknown command %d", c.Kind))
	}
	return false, nil
}

// open opens a context. Everything that can refuse it (fields, limits,
// the voice, credits) is checked before it is billed or opened.
func (s *session) open(c *Command) (bool, error) {
	p := c.Open
	if p == nil {
		s.reject(Invalid(c.Context, "no open context %q", c.Context))
		return false, nil
	}
	engines, err := s.engines()
	if err != nil {
		return true, s.fatal("", control.EInternal, "internal error", disconnectInternal, err)
	}
	// Any engine's language passes here (before the voice is looked up);
	// the voice's engine decides below, by the same rule. None (a Wire
	// whose client names none) is the voice's language (synth.Prepare).
	if _, ok := langtag.Match(p.Options.Language, engines.Languages()); !ok && p.Options.Language != "" {
		s.reject(&Refusal{c.Context, control.EInvalidLanguage, fmt.Sprintf("language %q is not supported", p.Options.Language)})
		return false, nil
	}
	textChars := int(control.CountChars(c.Text))
	// Only this goroutine opens tasks, so the checks below stay true until
	// the task is added (others can only close tasks).
	s.mu.Lock()
	dup, open, winding := s.findLocked(c.Context) != nil, len(s.tasks), s.winding || s.closing
	s.mu.Unlock()
	switch {
	case winding:
		// The open contexts may finish; the client opens new ones on
		// another server.
		s.reject(&Refusal{c.Context, control.EShuttingDown, "the server is shutting down: open new contexts on a new connection"})
		return false, nil
	case dup:
		s.reject(&Refusal{c.Context, CodeContextExists, fmt.Sprintf("context %q is already open", c.Context)})
		return false, nil
	case open >= s.cfg.MaxContexts:
		s.reject(&Refusal{c.Context, CodeTooManyContexts, fmt.Sprintf("at most %d contexts can be open", s.cfg.MaxContexts)})
		return false, nil
	case textChars > s.cfg.MaxPendingText:
		s.reject(&Refusal{c.Context, control.ETextTooLong, fmt.Sprintf("more than %d characters waiting in this context", s.cfg.MaxPendingText)})
		return false, nil
	}
	voice, err := s.voice(p.Voice)
	if err != nil {
		var r *Refusal
		if errors.As(err, &r) {
			r.Context = c.Context
			s.reject(r)
			return false, nil
		}
		return true, s.fatal(c.Context, control.EInternal, "internal error", disconnectInternal, err)
	}
	// The voice's engine, the voice's settings under the request's fields,
	// and that engine's tag for the language: as on every transport.
	eng, err := synth.EngineFor(engines, voice)
	if err != nil {
		e := control.AsError(err)
		s.reject(&Refusal{c.Context, e.Code, e.Message})
		return false, nil
	}
	req, err := synth.Prepare(voice, p.Options, eng.Languages())
	if err != nil {
		s.reject(refusal(c.Context, err))
		return false, nil
	}
	if err := engine.Admit(eng); errors.Is(err, engine.ErrOverCapacity) {
		s.refuseStart(c.Context, eng, err)
		return false, nil
	}
	charged, end, err := s.charge(c.Context, textChars)
	if end {
		return true, err
	}
	t := &task{s: s, id: c.Context, trace: control.NewID(), format: p.Options.Format, rate: p.Options.SampleRate,
		buffer: p.Buffer, start: time.Now(), req: req, eng: eng, words: engine.WordTimes(eng)}
	if t.buffer.IdleFlush == 0 {
		t.buffer.IdleFlush = s.cfg.IdleFlush
	}
	t.timestamps = t.words && p.Options.Timestamps
	s.mu.Lock()
	if s.aborting != nil {
		// The session is ending (revoked, shutting down): the reader
		// answers that; nothing of this frame is kept.
		s.mu.Unlock()
		s.refund(charged)
		return false, nil
	}
	t.bill.add(charged)
	s.tasks = append(s.tasks, t)
	t.observeStart()
	t.enc = s.wire.Encoder(&ContextInfo{ID: t.id, Voice: voice, Format: string(t.format), SampleRate: t.rate,
		Timestamps: t.timestamps, Trace: t.trace})
	f := getFrame()
	f.hdr = t.enc.Started(f.hdr)
	s.pushLocked(f, true) // before any audio of the task can be queued
	t.appendLocked(c.Text, c.Finalize)
	s.mu.Unlock()
	return false, nil
}

// refuseStart answers a task_start the voice's engine refuses for capacity
// (engine.Admitter): task_failed upstream_busy at once, without
// task_started; the context is never opened and nothing is billed. The
// client retries it later, or elsewhere (docs/realtime.md). The engine
// takes the streams it already has to the end: a refusal falls only on new
// contexts (and, on a race with others, a context's first sentence).
func (s *session) refuseStart(contextID string, eng engine.Engine, err error) {
	code, retryAfter := engineFailure(err)
	trace := ""
	if o := s.deps.Observer; o != nil {
		// Counted and traced like any context that failed.
		if span := o.ContextStarted(time.Now(), eng.Name()); span != nil {
			trace = span.TraceID()
			span.End(code, 0)
		}
	}
	if trace == "" {
		trace = control.NewID()
	}
	f := getFrame()
	f.hdr = s.wire.Encoder(&ContextInfo{ID: contextID, Trace: trace}).Failed(f.hdr, code, retryAfter, 0, trace)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
}

// voice resolves the voice a context names; a *Refusal is a non-fatal refusal.
func (s *session) voice(id string) (*control.Voice, error) {
	if s.deps.Voice == nil {
		return nil, errors.New("sessions: no voice lookup configured")
	}
	v, err := s.deps.Voice(s.parent, id)
	switch control.ErrorCode(err) {
	case "":
		if v == nil || v.Status != control.VoiceReady {
			return nil, &Refusal{Code: CodeVoiceNotFound, Message: "voice is not ready"}
		}
		return v, nil
	case control.ENotFound, control.EVoiceNotReady, control.EInvalidVoiceID:
		return nil, &Refusal{Code: CodeVoiceNotFound, Message: fmt.Sprintf("voice %q not found", id)}
	case control.EVoiceNotAllowed:
		return nil, &Refusal{Code: control.EVoiceNotAllowed, Message: fmt.Sprintf("voice %q is not allowed for this token", id)}
	}
	return nil, err
}

// charge bills chars for one frame. end reports that the session is over:
// the frame that exceeded the balance is not forwarded. A session that is
// already ending (its key revoked, say) charges nothing more.
func (s *session) charge(contextID string, chars int) (c control.Charge, end bool, err error) {
	if s.deps.Billing == nil || chars == 0 || s.ending() {
		return c, false, nil
	}
	c, err = s.deps.Billing.Charge(s.parent, int64(chars))
	switch control.ErrorCode(err) {
	case "":
		return c, false, nil
	case control.EInsufficientCredits, control.EQuotaExhausted:
		// Running out mid-session is always this code, whether the
		// allowance or the credits ran out.
		return c, true, s.fatal(contextID, control.EInsufficientCredits, "not enough characters left for this text", disconnectCredits, err)
	}
	return c, true, s.fatal(contextID, control.EInternal, "internal error", disconnectInternal, err)
}

// appendText adds an Append's text to its context.
func (s *session) appendText(c *Command) (bool, error) {
	textChars := int(control.CountChars(c.Text))
	var e *Refusal
	s.mu.Lock()
	t := s.findLocked(c.Context)
	switch {
	case t == nil:
		e = Invalid(c.Context, "no open context %q", c.Context)
	case t.finalized:
		e = Invalid(c.Context, "context %q is finalized", c.Context)
	case t.waitingChars()+textChars > s.cfg.MaxPendingText:
		e = &Refusal{c.Context, control.ETextTooLong, fmt.Sprintf("more than %d characters waiting in this context", s.cfg.MaxPendingText)}
	}
	s.mu.Unlock()
	if e != nil {
		s.reject(e)
		return false, nil
	}
	charged, end, err := s.charge(c.Context, textChars)
	if end {
		return true, err
	}
	s.mu.Lock()
	// The task cannot have been cancelled (only this goroutine cancels),
	// but it can have failed, or the session started ending, while the
	// meter was asked.
	closed := t.closed || s.aborting != nil
	if !closed {
		t.bill.add(charged)
		t.appendLocked(c.Text, c.Finalize)
	}
	s.mu.Unlock()
	if closed {
		s.refund(charged) // text that will never be spoken is not billed
	}
	return false, nil
}

// refund gives back a charge none of whose text reached a context.
func (s *session) refund(c control.Charge) {
	s.mu.Lock()
	s.refunds = append(s.refunds, c)
	s.mu.Unlock()
	s.flushRefunds()
}

// ending reports that the session is on its way out.
func (s *session) ending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborting != nil || s.stopping
}

// cancel stops a context at once; a context that finished but whose end
// the client has not been sent yet is still cancelled.
func (s *session) cancel(c *Command) {
	s.mu.Lock()
	t := s.findLocked(c.Context)
	if t == nil {
		// Finished, but its task_done has not been taken for writing.
		for _, d := range s.draining {
			if d.id == c.Context {
				t = d
				break
			}
		}
	}
	if t == nil {
		s.mu.Unlock()
		if !c.IfOpen {
			s.reject(Invalid(c.Context, "no open context %q", c.Context))
		}
		return
	}
	s.cancelTaskLocked(t)
	s.mu.Unlock()
	s.flushRefunds()
}

// cancelTaskLocked cancels t and queues its receipt.
func (s *session) cancelTaskLocked(t *task) {
	completed, dropped := t.cancelLocked()
	r := t.receiptLocked()
	f := getFrame()
	f.hdr = t.enc.Cancelled(f.hdr, &Cancelled{Completed: completed, Dropped: dropped, AudioSentS: r.audioSent,
		SpokenUntil: r.spokenUntil, Trace: t.trace})
	s.pushLocked(f, true)
}

// clear cancels every open context (and those whose end is not sent yet).
func (s *session) clear() {
	s.mu.Lock()
	for len(s.tasks) > 0 {
		s.cancelTaskLocked(s.tasks[0])
	}
	for len(s.draining) > 0 {
		s.cancelTaskLocked(s.draining[0])
	}
	s.mu.Unlock()
	s.flushRefunds()
}

// flush renders a context's waiting text now and answers Flushed once the
// audio of all its text so far has been queued for the client.
func (s *session) flush(c *Command) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.findLocked(c.Context)
	if t == nil {
		f := getFrame()
		f.hdr = s.wire.Encoder(&ContextInfo{ID: c.Context}).Flushed(f.hdr, c.FlushID)
		s.pushLocked(f, false)
		return
	}
	t.flushPendingLocked()
	if len(t.queued) == 0 && !t.inflight {
		t.flushedLocked(c.FlushID)
	} else {
		t.flushes = append(t.flushes, flushMark{last: t.nextIndex + len(t.queued) - 1, id: c.FlushID})
	}
	t.kickLocked()
}

// endWhenDone ends the session once its open contexts have spoken all
// their text (finalizing them); new contexts are refused meanwhile.
func (s *session) endWhenDone() (bool, error) {
	s.mu.Lock()
	s.closing = true
	if len(s.tasks) == 0 {
		s.mu.Unlock()
		return true, s.finish(disconnectNormal, s.sessionEndedFrame("client_request"), nil)
	}
	for _, t := range append([]*task(nil), s.tasks...) {
		if !t.finalized {
			t.appendLocked("", true)
		}
	}
	s.mu.Unlock()
	return false, nil
}

// engines is the registry the session renders with: Deps.Engines, or one
// of Deps.Engine alone.
func (s *session) engines() (*engine.Registry, error) {
	if s.deps.Engines != nil {
		return s.deps.Engines, nil
	}
	if s.deps.Engine == nil {
		return nil, errors.New("sessions: no engine configured")
	}
	return engine.NewRegistry(s.deps.Engine)
}
