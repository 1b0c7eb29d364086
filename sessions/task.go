package sessions

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/synth"
)

// task is one synthesis context. An open task that has nothing to say holds
// only this struct: its runner goroutine exists while sentences wait, its
// codec pipeline while one sentence renders, its timer while a partial
// sentence waits for the idle flush.
type task struct {
	s       *session
	id      string
	enc     Encoder // the protocol's messages for this context
	trace   string
	req     engine.Request
	eng     engine.Engine // the voice's engine
	format  codec.Format
	rate    int
	buffer  Buffer      // how text waits to be spoken (IdleFlush set)
	start   time.Time   // task_start received, for ttfb
	span    ContextSpan // Deps.Observer's (observe.go); set before the task is shared
	outcome string      // how it closed, for span.End; guarded by s.mu
	ended   bool        // span.End was called; guarded by s.mu
	// words: the engine reports where words start, so the context knows
	// what was heard (the cancel receipt) and, when timestamps was asked,
	// sends word_timestamps frames.
	words      bool
	timestamps bool

	// Guarded by s.mu.
	gone        bool // cancelled or session ending: its frames are dropped
	closed      bool // no longer open (done, failed, cancelled)
	finalized   bool
	running     bool
	inflight    bool   // the runner is rendering a sentence
	pending     string // text after the last certain sentence end
	queued      []sentence
	queuedChars int         // the queued sentences' costs (billing.go)
	dropped     int         // characters cut away with nothing to speak
	bill        ledger      // what the context's frames were charged
	nextIndex   int         // sentence_index of the next sentence to render
	textAt      int         // code points of the context's text before pending
	heard       []heardWord // receipt.go
	spokenBase  int         // spoken_until of the words folded out of heard
	sentS       float64     // seconds of audio handed to the socket
	completed   int         // sentence_done frames queued and not purged
	lastText    time.Time
	timer       *time.Timer
	flushes     []flushMark        // Flushes answered once their text's audio is queued
	pieces      int                // pieces spoken by Buffer.Schedule
	cancel      context.CancelFunc // the running runner's context

	// Owned by the runner (runners of one task never overlap).
	clock *synth.WordClock
	// ahead is the next sentence rendering while the current one streams,
	// for engines where that pays (engine.WantsAhead): its request to an
	// upstream is then under way when its turn comes.
	ahead      *engine.Ahead
	aheadText  string
	audio      float64 // seconds sent
	generate   time.Duration
	firstAudio time.Duration
}

// waitingChars is the text accepted but not yet rendering (the 100,000
// character cap of one context).
func (t *task) waitingChars() int { return utf8.RuneCountInString(t.pending) + t.queuedChars }

// appendLocked adds client text: every sentence whose end is now certain is
// queued at once (not one message later), the rest waits for more text,
// the idle flush or finalize (or as the context's Buffer says).
func (t *task) appendLocked(text string, finalize bool) {
	now := time.Now()
	if text != "" {
		t.lastText = now
		t.pending += text
		switch b := &t.buffer; {
		case b.Immediate:
			t.flushPendingLocked()
		case b.Hold:
		case len(b.Schedule) > 0:
			t.scheduleLocked()
		default:
			spans, rest := engine.CutComplete(t.pending)
			t.queueCut(t.pending, spans, rest)
			t.pending = t.pending[rest:]
		}
	}
	if finalize {
		t.finalized = true
		t.flushPendingLocked()
	}
	switch {
	case t.pending == "" || t.finalized || t.buffer.IdleFlush < 0:
		if t.timer != nil {
			t.timer.Stop()
		}
	case t.timer == nil:
		t.timer = time.AfterFunc(t.buffer.IdleFlush, t.onIdleFlush)
	default:
		t.timer.Reset(t.buffer.IdleFlush)
	}
	t.kickLocked()
}

// scheduleLocked speaks the waiting text once it holds the schedule's next
// number of characters, up to the last word that fits (ElevenLabs'
// chunk_length_schedule).
func (t *task) scheduleLocked() {
	sched := t.buffer.Schedule
	for {
		need := sched[min(t.pieces, len(sched)-1)]
		if utf8.RuneCountInString(t.pending) < need {
			return
		}
		cut := lastWordEnd(t.pending)
		if cut == 0 {
			return // one word longer than the piece: wait for its end
		}
		piece := t.pending[:cut]
		t.queueCut(piece, engine.Sentences(piece), cut)
		t.pending = t.pending[cut:]
		t.pieces++
	}
}

// lastWordEnd is the byte offset after the last space of s that follows a
// word (0: none).
func lastWordEnd(s string) int {
	for i := len(s) - 1; i > 0; i-- {
		if s[i] == ' ' || s[i] == '\n' || s[i] == '\t' {
			if c := s[i-1]; c != ' ' && c != '\n' && c != '\t' {
				return i + 1
			}
		}
	}
	return 0
}

// flushPendingLocked renders the partial sentence as it is.
func (t *task) flushPendingLocked() {
	if t.pending != "" {
		t.queueCut(t.pending, engine.Sentences(t.pending), len(t.pending))
		t.pending = ""
	}
}

// flushMark is a Flush waiting for the audio of sentence last.
type flushMark struct {
	last int
	id   string
}

// flushedLocked queues the answer to a Flush, behind the audio before it.
func (t *task) flushedLocked(id string) {
	f := getFrame()
	f.task = t
	f.hdr = t.enc.Flushed(f.hdr, id)
	t.s.pushLocked(f, false)
}

// sentenceSentLocked answers the Flushes that waited for sentence index.
func (t *task) sentenceSentLocked(index int) {
	for len(t.flushes) > 0 && t.flushes[0].last <= index {
		t.flushedLocked(t.flushes[0].id)
		t.flushes = t.flushes[1:]
	}
	if len(t.flushes) == 0 {
		t.flushes = nil
	}
}

// onIdleFlush runs on the timer's goroutine after idle_flush of client
// silence for this context.
func (t *task) onIdleFlush() {
	s := t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.closed || t.pending == "" {
		return
	}
	// A message that raced the timer moved lastText: wait out the rest.
	if rest := t.buffer.IdleFlush - time.Since(t.lastText); rest > time.Millisecond {
		t.timer.Reset(rest)
		return
	}
	t.flushPendingLocked()
	t.kickLocked()
}

// kickLocked starts the runner when sentences wait, or finishes a
// finalized task with nothing left to render.
func (t *task) kickLocked() {
	s := t.s
	switch {
	case t.closed || t.running || s.stopping || s.aborting != nil:
		// (An ending session starts no synthesis: nothing is billed
		// after a revocation is seen, and its text is given back.)
	case len(t.queued) > 0:
		ctx, cancel := context.WithCancel(s.parent)
		t.running, t.cancel = true, cancel
		s.busy++
		if s.busy == 1 {
			s.setDeadlineLocked()
		}
		s.wg.Add(1)
		go t.run(ctx)
	case t.finalized && t.pending == "":
		t.doneLocked()
	}
}

// run renders the queued sentences one by one, in order, then exits. Each
// sentence is one engine call, so the pool interleaves contexts fairly.
func (t *task) run(ctx context.Context) {
	s := t.s
	defer s.wg.Done()
	s.mu.Lock()
	for !t.closed && len(t.queued) > 0 && s.aborting == nil {
		// From here the sentence's characters are spent (billing.go).
		text, at, cost := t.queued[0].text, t.queued[0].at, t.queued[0].cost
		t.queuedChars -= t.queued[0].cost
		t.queued[0] = sentence{}
		t.queued = t.queued[1:]
		index := t.nextIndex
		t.nextIndex++
		t.inflight = true
		next := ""
		if len(t.queued) > 0 && engine.WantsAhead(t.eng) {
			next = t.queued[0].text
		}
		s.mu.Unlock()

		pre := t.takeAhead(text)
		if next != "" {
			// At most one sentence ahead: the one after this.
			t.aheadText, t.ahead = next, engine.RenderAhead(ctx, t.eng, t.request(next, index+1), aheadChunks)
		}
		dur, err := t.render(ctx, index, text, at, pre)

		s.mu.Lock()
		t.inflight = false
		switch {
		case t.gone:
		case err == nil:
			t.sentenceEndedLocked(index, t.audio)
			t.completed++
			f := getFrame()
			f.task, f.kind = t, kindSentenceDone
			f.hdr = t.enc.SentenceDone(f.hdr, index, text, dur)
			s.pushLocked(f, false)
			t.sentenceSentLocked(index)
		default:
			if dur == 0 && errors.Is(err, engine.ErrBusy) {
				// Refused by the engine before any of it was rendered:
				// its synthesis never started, so it is not billed.
				t.dropped += cost
			}
			t.failLocked(err)
		}
	}
	if t.ahead != nil {
		// Cancelled, failed or closed with a sentence rendering ahead:
		// stop it (its characters are refunded with the queue's).
		s.mu.Unlock()
		t.takeAhead("")
		s.mu.Lock()
	}
	t.running = false
	t.cancel()
	t.cancel = nil
	if len(t.queued) == 0 {
		t.queued = nil // an idle context keeps no slice
	}
	s.busy--
	if s.busy == 0 {
		s.lastActive = time.Now()
		s.setDeadlineLocked()
		s.wakeWriterLocked()
	}
	t.kickLocked() // finalized meanwhile, or more text arrived at the end
	s.mu.Unlock()
	s.flushRefunds()
}

// aheadChunks bounds what a sentence rendering ahead holds before its turn:
// a second of 20 ms chunks.
const aheadChunks = 50

// takeAhead returns the sentence rendering ahead when it is text, and
// stops it otherwise (nil).
func (t *task) takeAhead(text string) *engine.Ahead {
	a := t.ahead
	if a == nil {
		return nil
	}
	t.ahead = nil
	if t.aheadText != text || text == "" {
		a.Cancel()
		return nil
	}
	return a
}

// request is the task's engine request for sentence index. The pool serves
// what is due first: a sentence is due when the context's audio so far
// will have played (from its first chunk), so a context with audio in
// hand yields to one whose listener waits. Every sentence after the first
// continues the context, which the engine took with the first: an engine
// at capacity refuses a context's first sentence (task_failed
// upstream_busy), never the rest of a context it is speaking.
func (t *task) request(text string, index int) engine.Request {
	req := t.req
	req.Text = text
	req.Due = t.start.Add(t.firstAudio + time.Duration(t.audio*float64(time.Second)))
	req.Continues = index > 0
	return req
}

// render synthesizes one sentence, which starts at code point at of the
// context's text, and queues its audio pairs (each after the words whose
// start it holds). It returns the sentence's audio duration. pre, when
// set, is the sentence already rendering ahead.
func (t *task) render(ctx context.Context, index int, text string, at int, pre *engine.Ahead) (float64, error) {
	s := t.s
	pipe, err := codec.NewPipeline(t.eng.NativeRate(), t.format, t.rate)
	if err != nil {
		return 0, err
	}
	defer pipe.Close()
	var dur float64
	chunk := 0
	var began time.Time // the engine's start, set below
	send := func(b []byte) error {
		d := t.duration(len(b))
		f := getFrame()
		f.task, f.kind, f.dur = t, kindAudio, d
		a := Audio{Sentence: index, Chunk: chunk, Duration: d, Bytes: b}
		f.hdr, f.bin = t.enc.Audio(f.hdr, f.bin, &a)
		f.pair = len(f.bin) > 0
		if t.firstAudio == 0 {
			t.firstAudio = time.Since(t.start)
			if t.span != nil {
				t.span.FirstAudio(t.firstAudio, time.Since(began))
			}
		}
		if err := s.pushAudio(t, f); err != nil {
			return err
		}
		chunk++
		dur += d
		return nil
	}
	req := t.request(text, index)
	began = time.Now()
	var eng engine.Engine = t.eng
	if pre != nil {
		eng = &aheadFirst{Engine: t.eng, ahead: pre}
	}
	eng = patient{eng}
	if t.words {
		if t.clock == nil {
			t.clock = synth.NewWordClock(t.eng.NativeRate(), "")
		}
		t.clock.Reset(text, at, t.audio)
		eng = synth.Tap(eng, func(c engine.Chunk) error { return t.heardWords(index, text, at, t.clock.Chunk(c)) })
	}
	_, err = synth.Run(ctx, eng, req, pipe, send)
	t.generate += time.Since(began)
	t.audio += dur
	return dur, err
}

// aheadFirst plays the sentence rendered ahead; a second call (patient
// trying again after the engine was busy) renders anew.
type aheadFirst struct {
	engine.Engine
	ahead *engine.Ahead
}

func (a *aheadFirst) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	if pre := a.ahead; pre != nil {
		a.ahead = nil
		return pre.Synthesize(ctx, req, emit)
	}
	return a.Engine.Synthesize(ctx, req, emit)
}

// patient is the engine as a live session uses it: while the pool is full
// and nothing was emitted yet it waits and tries again, since for a live
// session a short wait beats failing the context. A refusal for capacity
// (engine.ErrOverCapacity, only ever a context's first sentence) is the
// answer at once: waiting would make this context the late stream the
// refusal is there to prevent.
type patient struct{ engine.Engine }

func (p patient) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	emitted := false
	wrapped := func(c engine.Chunk) error {
		emitted = true
		return emit(c)
	}
	backoff := 20 * time.Millisecond
	for waited := time.Duration(0); ; waited += backoff {
		err := p.Engine.Synthesize(ctx, req, wrapped)
		if !errors.Is(err, engine.ErrBusy) || errors.Is(err, engine.ErrOverCapacity) || emitted || waited >= 3*time.Second {
			return err
		}
		tm := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		case <-tm.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// duration of n bytes of output: PCM from its sample width, Opus by its
// fixed 20 ms packets.
func (t *task) duration(n int) float64 {
	if bps := t.format.BytesPerSample(); bps > 0 {
		return float64(n/bps) / float64(t.rate)
	}
	return float64(codec.OpusFrameSamples) / float64(codec.OpusRate)
}

// doneLocked closes a finalized task whose sentences are all sent.
func (t *task) doneLocked() {
	s := t.s
	t.outcome = outcomeOK
	t.closeLocked()
	if s.stopping || s.broken {
		return
	}
	f := getFrame()
	f.task, f.kind = t, kindTaskDone
	f.hdr = t.enc.Done(f.hdr, &Done{Sentences: t.completed, AudioS: t.audio,
		FirstAudioMS: float64(t.firstAudio) / 1e6, Generate: float64(t.generate) / 1e6, Trace: t.trace})
	// Until the writer takes its task_done, the client has not seen the
	// context end: a cancel must still stop its audio (cancelLocked).
	s.draining = append(s.draining, t)
	s.pushLocked(f, false)
}

// undrainLocked forgets t as a finished context awaiting its task_done.
func (s *session) undrainLocked(t *task) {
	s.draining = removeTask(s.draining, t)
}

// removeTask swap-removes t from list (order does not matter in either list
// it serves) and drops the backing array once the list is empty, so an idle
// session holds none.
func removeTask(list []*task, t *task) []*task {
	for i, o := range list {
		if o == t {
			last := len(list) - 1
			list[i], list[last] = list[last], nil
			list = list[:last]
			break
		}
	}
	if len(list) == 0 {
		return nil
	}
	return list
}

// failLocked ends the task after a terminal synthesis failure; only an
// engine that cannot run at all ends the session (close 1013).
func (t *task) failLocked(err error) {
	s := t.s
	if errors.Is(err, errGone) || errors.Is(err, context.Canceled) {
		// The session is ending (socket broken, server shutdown): stop
		// quietly, finish answers the client.
		t.gone = true
		t.outcome = outcomeClientGone
		t.closeLocked()
		return
	}
	if errors.Is(err, engine.ErrUnavailable) {
		f := getFrame()
		f.hdr = s.wire.AppendError(f.hdr, t.id, control.EUnavailable, "the synthesis engine is unavailable", true)
		s.abortLocked(disconnectTryLater, f)
		t.gone = true
		t.outcome = control.EUnavailable
		t.closeLocked()
		return
	}
	code, retryAfter := engineFailure(err)
	if !errors.Is(err, engine.ErrOverCapacity) {
		// (A refusal for capacity is an answer, counted by the metrics:
		// under overload there are thousands a second.)
		s.log.Warn("websocket context failed", "context_id", t.id, "trace_id", t.trace, "err", err)
	}
	t.outcome = code
	t.closeLocked()
	f := getFrame()
	f.hdr = t.enc.Failed(f.hdr, code, retryAfter, t.completed, t.trace)
	s.pushLocked(f, false)
}

// engineFailure is the code every transport gives an engine failure and, for
// upstream_busy, the seconds the engine asks to be left alone (the HTTP
// Retry-After of the same refusal).
func engineFailure(err error) (code string, retryAfter int) {
	err = synth.EngineError(err)
	var ce *control.Error
	if errors.As(err, &ce) && ce.Code == control.EUpstreamBusy {
		retryAfter = ce.RetryAfter
	}
	return control.ErrorCode(err), retryAfter
}

// closeLocked frees the task's slot among the open contexts at once and
// gives back the characters of its text that never reached the engine.
func (t *task) closeLocked() {
	s := t.s
	t.closed = true
	t.observeEnd()
	t.unspentLocked()
	t.queued, t.queuedChars, t.pending = nil, 0, ""
	if t.timer != nil {
		t.timer.Stop()
	}
	s.tasks = removeTask(s.tasks, t)
	if len(s.tasks) == 0 {
		s.lastContextClosedLocked()
	}
}

// cancelLocked stops the task's engine work and drops its queued audio;
// nothing of it is written after this returns. It reports what the client
// got and what it will not get.
func (t *task) cancelLocked() (completed, dropped int) {
	s := t.s
	dropped = len(t.queued) + len(engine.Sentences(t.pending))
	if t.inflight {
		dropped++
	}
	t.gone = true
	if t.outcome == "" {
		t.outcome = outcomeCancelled
	}
	t.closeLocked()
	s.undrainLocked(t)
	if t.cancel != nil {
		t.cancel()
	}
	purged := s.purgeLocked(t)
	t.completed -= purged
	return t.completed, dropped + purged
}
