package sessions

import (
	"errors"
	"fmt"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/jsonw"
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

// taskStart opens a context. Everything that can refuse it (fields, limits,
// the voice, credits) is checked before it is billed or opened.
func (s *session) taskStart(m *synth.Fields) (bool, error) {
	engines, err := s.engines()
	if err != nil {
		return true, s.fatal("", control.EInternal, "internal error", disconnectInternal, err)
	}
	// Any engine's language passes here; the voice's engine decides below.
	p, e := parseStart(m, s.cfg.IdleFlush, engines.Languages())
	if e != nil {
		s.reject(e)
		return false, nil
	}
	// Only this goroutine opens tasks, so the checks below stay true until
	// the task is added (others can only close tasks).
	s.mu.Lock()
	dup, open, winding := s.findLocked(p.contextID) != nil, len(s.tasks), s.winding
	s.mu.Unlock()
	if winding {
		// The open contexts may finish; the client opens new ones on
		// another server.
		s.reject(&msgError{p.contextID, control.EShuttingDown, "the server is shutting down: open new contexts on a new connection"})
		return false, nil
	}
	if dup {
		s.reject(&msgError{p.contextID, codeContextExists, fmt.Sprintf("context %q is already open", p.contextID)})
		return false, nil
	}
	if open >= s.cfg.MaxContexts {
		s.reject(&msgError{p.contextID, codeTooManyContexts, fmt.Sprintf("at most %d contexts can be open", s.cfg.MaxContexts)})
		return false, nil
	}
	voice, err := s.voice(p.voiceID)
	if err != nil {
		var me *msgError
		if errors.As(err, &me) {
			me.contextID = p.contextID
			s.reject(me)
			return false, nil
		}
		return true, s.fatal(p.contextID, control.EInternal, "internal error", disconnectInternal, err)
	}
	// The voice's engine, the voice's settings under the request's fields,
	// and that engine's tag for the language: as on every transport.
	eng, err := synth.EngineFor(engines, voice)
	if err != nil {
		e := control.AsError(err)
		s.reject(&msgError{contextID: p.contextID, code: e.Code, msg: e.Message})
		return false, nil
	}
	req, err := synth.Prepare(voice, p.opts, eng.Languages())
	if err != nil {
		s.reject(refusal(p.contextID, err))
		return false, nil
	}
	if err := engine.Admit(eng); errors.Is(err, engine.ErrOverCapacity) {
		s.refuseStart(p.contextID, eng, err)
		return false, nil
	}
	charged, end, err := s.charge(p.contextID, p.textChars)
	if end {
		return true, err
	}
	t := &task{s: s, id: p.contextID, idJSON: jsonw.AppendString(nil, p.contextID), trace: control.NewID(),
		format: p.opts.Format, rate: p.opts.SampleRate, idleFlush: p.idleFlush, start: time.Now(), req: req, eng: eng,
		words: engine.WordTimes(eng)}
	t.timestamps = t.words && p.opts.Timestamps
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
	f := getFrame()
	f.hdr = appendTaskStarted(f.hdr, t.idJSON, t.rate, string(t.format), t.timestamps)
	s.pushLocked(f, true) // before any audio of the task can be queued
	t.appendLocked(p.opts.Text, p.finalize)
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
	f.hdr = appendTaskFailed(f.hdr, jsonw.AppendString(nil, contextID), 0, code, retryAfter, trace)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
}

// voice resolves voice_id; a *msgError is a non-fatal refusal.
func (s *session) voice(id string) (*control.Voice, error) {
	if s.deps.Voice == nil {
		return nil, errors.New("sessions: no voice lookup configured")
	}
	v, err := s.deps.Voice(s.parent, id)
	switch control.ErrorCode(err) {
	case "":
		if v == nil || v.Status != control.VoiceReady {
			return nil, &msgError{code: codeVoiceNotFound, msg: "voice is not ready"}
		}
		return v, nil
	case control.ENotFound, control.EVoiceNotReady, control.EInvalidVoiceID:
		return nil, &msgError{code: codeVoiceNotFound, msg: fmt.Sprintf("voice %q not found", id)}
	case control.EVoiceNotAllowed:
		return nil, &msgError{code: control.EVoiceNotAllowed, msg: fmt.Sprintf("voice %q is not allowed for this token", id)}
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

func (s *session) taskContinue(m *synth.Fields) (bool, error) {
	p, e := parseContinue(m)
	if e != nil {
		s.reject(e)
		return false, nil
	}
	s.mu.Lock()
	t := s.findLocked(p.contextID)
	switch {
	case t == nil:
		e = invalid(p.contextID, "no open context %q", p.contextID)
	case t.finalized:
		e = invalid(p.contextID, "context %q is finalized", p.contextID)
	case t.waitingChars()+p.textChars > s.cfg.MaxPendingText:
		e = &msgError{p.contextID, control.ETextTooLong, fmt.Sprintf("more than %d characters waiting in this context", s.cfg.MaxPendingText)}
	}
	s.mu.Unlock()
	if e != nil {
		s.reject(e)
		return false, nil
	}
	charged, end, err := s.charge(p.contextID, p.textChars)
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
		t.appendLocked(p.text, p.finalize)
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

func (s *session) taskCancel(m *synth.Fields) {
	id, e := contextID(m)
	if e != nil {
		s.reject(e)
		return
	}
	s.mu.Lock()
	t := s.findLocked(id)
	if t == nil {
		// Finished, but its task_done has not been taken for writing.
		for _, d := range s.draining {
			if d.id == id {
				t = d
				break
			}
		}
	}
	if t == nil {
		s.mu.Unlock()
		s.reject(invalid(id, "no open context %q", id))
		return
	}
	completed, dropped := t.cancelLocked()
	f := getFrame()
	f.hdr = appendTaskCancelled(f.hdr, t.idJSON, completed, dropped, t.receiptLocked(), t.trace)
	s.pushLocked(f, true)
	s.mu.Unlock()
	s.flushRefunds()
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
