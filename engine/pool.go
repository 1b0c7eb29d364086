package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// ErrWorkerDied: the worker running a sentence went away (its process
// exited). The pool restarts the worker and retries the sentence once if
// none of its audio had been delivered; otherwise the request fails with
// this error.
var ErrWorkerDied = errors.New("engine: worker died")

// Worker runs one synthesis at a time for the pool. The pool hands it one
// sentence per call, so Synthesize sees single-sentence text.
type Worker interface {
	Synthesize(ctx context.Context, req Request, emit func(Chunk) error) error
	Close() error
}

// InProcess makes a Worker of an engine in this process. For espeak-ng,
// which renders one sentence at a time per process, only one makes sense.
func InProcess(e Engine) Worker { return inProcess{e} }

type inProcess struct{ Engine }

func (inProcess) Close() error { return nil }

// PoolOptions configure a Pool.
type PoolOptions struct {
	// Engine answers Name, NativeRate, Languages, Catalog and Enroll, and
	// is the in-process worker when NewWorker is nil. Required.
	Engine Engine
	// Workers is the number of workers (default runtime.NumCPU()).
	Workers int
	// QueueDepth bounds the requests admitted at once (being synthesized
	// or waiting for a worker); beyond it Synthesize returns ErrBusy.
	// Default 64.
	QueueDepth int
	// WorkerDepth is how many sentences a worker holds at once: one
	// rendering and the rest waiting in it, so that it starts the next
	// sentence the moment it finishes, without waiting for this process to
	// be scheduled and answer, which with every core rendering can take a
	// while. Default 2: espeak-ng's lock queues the second in process. A
	// subprocess worker is better off with 3 (worker.Depth): with both cores
	// rendering, the gateway sometimes took longer than a sentence to send
	// the next, and at 2 the workers sat idle 2-8% of the time. A new
	// request does not wait behind the extra one: the child renders a
	// sentence whose listener is waiting before those whose listener has
	// audio in hand (Request.InHand).
	WorkerDepth int
	// NewWorker starts worker i (also to replace one that died). Default:
	// InProcess(Engine).
	NewWorker func(i int) (Worker, error)
	// RecycleSamples promises that every emit passed to Synthesize is done
	// with a chunk's Samples when it returns (it copies what it keeps), so
	// the pool gives the buffer back for the next chunk a subprocess worker
	// reads (SampleBuffer). The server's consumers encode the samples at
	// once; the garbage they no longer leave was a quarter of the gateway's
	// cost per audio second.
	RecycleSamples bool
	// MaxLag turns on graceful overload (admit.go): a new request is
	// refused with ErrOverCapacity, at once, while taking it would leave
	// the admitted work more than MaxLag behind schedule. Keep it under
	// dueSlack (250 ms), the margin a stream's next sentence is given
	// before its listener runs out. 0: never refuse for capacity (only
	// QueueDepth bounds what is admitted).
	MaxLag time.Duration
}

// PoolStats is a snapshot of the pool for metrics and tests.
type PoolStats struct {
	Workers   int    // live workers
	Active    int    // sentences held by workers now (rendering or queued in one)
	Queued    int    // admitted requests waiting for a worker
	Requests  int    // admitted requests not yet finished
	Completed uint64 // requests finished successfully
	Cancelled uint64 // requests stopped by their context
	Failed    uint64 // requests ended by an error
	Rejected  uint64 // requests refused with ErrBusy: the queue was full
	// Refused counts new requests, and Admit checks, refused for capacity
	// (ErrOverCapacity, PoolOptions.MaxLag).
	Refused   uint64
	Restarts  uint64 // workers replaced after dying
	Sentences uint64 // sentences synthesized
	// Wait is the time admitted requests waited for a worker to take their
	// first sentence: a histogram over WaitBuckets (cumulative counts are
	// made by the reader; these are per bucket, the last one above all).
	Wait WaitHistogram
	// Behind is how late a new request arriving now would start (admit.go:
	// the predicted wait or the measured lag, the larger); Refusing whether
	// the pool is refusing new requests (PoolOptions.MaxLag).
	Behind   time.Duration
	Refusing bool
	// Capacity is the audio seconds a second the workers render with all
	// of them busy, as learned from the sentences rendered under the
	// recent load (0 until learned).
	Capacity float64
}

// Pool is an Engine that runs requests on workers sentence by sentence,
// earliest deadline first. A new request is due as it arrives; once it has
// rendered audio, its deadline is dueSlack before a listener who started
// playing it on arrival would run out of audio (its arrival plus the audio
// rendered so far), so it is not due again until that sentence has nearly
// played. So a first sentence, which someone is waiting for, goes before
// the rest of a long text whose listener has audio in hand, and a long
// text cannot starve a short one (each sentence pushes its deadline back).
// A realtime context's next sentence (Request.Continues, one engine call
// per sentence, asked for once the last is out) is due dueSlack before it
// is asked for: a stream the pool already took goes before the new
// requests that came after it. Among requests that are all behind
// (overload), the one furthest behind goes first. With MaxLag, new
// requests beyond the pool's capacity are refused rather than queued
// (admit.go).
type Pool struct {
	opts PoolOptions

	mu       sync.Mutex
	wake     *sync.Cond // a job became ready, or the pool closed
	ready    []*job     // waiting for a worker, in arrival order (ties go to the first)
	closed   bool
	stats    PoolStats
	workers  []Worker
	starting []sync.Mutex // per worker: one replacement starts at a time
	adm      admission    // graceful overload (admit.go)
	wg       sync.WaitGroup
}

var _ Engine = (*Pool)(nil)

// NewPool starts the workers.
func NewPool(opts PoolOptions) (*Pool, error) {
	if opts.Engine == nil {
		return nil, errors.New("engine: pool needs an Engine")
	}
	if r, ok := opts.Engine.(recycled); ok {
		// A worker's emit queues the chunk for its caller and returns:
		// Recycled would give the samples back while they wait. The pool
		// recycles after delivery instead.
		opts.Engine, opts.RecycleSamples = r.Engine, true
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.NumCPU()
	}
	if opts.QueueDepth <= 0 {
		opts.QueueDepth = 64
	}
	if opts.WorkerDepth <= 0 {
		opts.WorkerDepth = 2
	}
	if opts.NewWorker == nil {
		e := opts.Engine
		opts.NewWorker = func(int) (Worker, error) { return InProcess(e), nil }
	}
	p := &Pool{opts: opts, workers: make([]Worker, opts.Workers), adm: newAdmission(opts.Workers)}
	p.wake = sync.NewCond(&p.mu)
	for i := range p.workers {
		w, err := opts.NewWorker(i)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("engine: start worker %d: %w", i, err)
		}
		p.workers[i] = w
		p.stats.Workers++
	}
	p.starting = make([]sync.Mutex, len(p.workers))
	for i := range p.workers {
		for range opts.WorkerDepth {
			p.wg.Add(1)
			go p.run(i)
		}
	}
	return p, nil
}

// wakeBatch is how many chunks a sentence's middle queues before its
// caller is woken to take them.
const wakeBatch = 4

// Close stops the workers; requests still running fail with ErrUnavailable.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, j := range p.ready {
		j.fail(fmt.Errorf("%w: pool closed", ErrUnavailable))
	}
	p.ready = nil
	p.wake.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
	var errs []error
	for _, w := range p.workers {
		if w != nil {
			errs = append(errs, w.Close())
		}
	}
	return errors.Join(errs...)
}

// Ready reports whether a new request would be admitted now: ErrUnavailable
// (wrapped) once the pool is closed, ErrBusy when its queue is full. The
// realtime handshake asks before it upgrades, so that a socket is not opened
// onto an engine that would refuse its first sentence.
func (p *Pool) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readyLocked()
}

func (p *Pool) readyLocked() error {
	switch {
	case p.closed:
		return fmt.Errorf("%w: pool closed", ErrUnavailable)
	case p.stats.Requests >= p.opts.QueueDepth:
		return fmt.Errorf("%w: %d requests in the engine queue", ErrBusy, p.stats.Requests)
	}
	return nil
}

// Stats returns a snapshot of the pool's state and counters.
func (p *Pool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Queued = len(p.ready)
	s.Behind = p.behindLocked(time.Now())
	if p.opts.MaxLag > 0 {
		// What a new request arriving now would be told: the state moves
		// as the next request would move it, so that an idle pool does
		// not show the refusal of the last burst.
		p.adm.refusing = refuse(p.adm.refusing, s.Behind, p.opts.MaxLag)
	}
	s.Refusing = p.adm.refusing
	s.Capacity = p.adm.rate * float64(p.stats.Workers)
	return s
}

func (p *Pool) Name() string            { return p.opts.Engine.Name() }
func (p *Pool) NativeRate() int         { return p.opts.Engine.NativeRate() }
func (p *Pool) Languages() []string     { return p.opts.Engine.Languages() }
func (p *Pool) Catalog() []CatalogVoice { return p.opts.Engine.Catalog() }
func (p *Pool) Enroll(ctx context.Context, clip Clip) ([]byte, error) {
	return p.opts.Engine.Enroll(ctx, clip)
}

// WordTimes: the workers run the same engine as opts.Engine.
func (p *Pool) WordTimes() bool { return WordTimes(p.opts.Engine) }

// maxAhead is how many synthesized sentences of a request may wait for
// its consumer before the request stops taking worker turns: a slow
// client must not make the pool render its whole text into memory.
const maxAhead = 2

// job is one request in the pool. Its fields are guarded by Pool.mu.
type job struct {
	ctx    context.Context // cancelled when the caller stops
	req    Request
	sents  []Span
	next   int  // next sentence to dispatch
	busy   bool // a worker holds the job
	parked bool // waiting for its consumer to catch up
	ahead  int  // sentences rendered but not yet delivered
	chunks []Chunk
	err    error
	stop   bool       // caller gave up: do not dispatch more
	cond   *sync.Cond // chunks, completion or failure for the caller

	queued  time.Time // when Synthesize admitted the request
	arrived time.Time // queued, or req.Due
	// due orders the queue: a new request's arrival; later, dueSlack
	// before its listener runs out (arrived + audio rendered).
	due time.Time
	// inHand: until then the listener has audio in hand (Request.InHand).
	// It is due, except for a realtime context's next sentence, which is
	// due sooner than its listener needs it.
	inHand  time.Time
	readyAt time.Time // when it last entered the ready queue

	samples, words int // offsets of the next sentence in the request's audio
}

func (j *job) fail(err error) {
	if j.err == nil {
		j.err = err
	}
	j.cond.Broadcast()
}

func (j *job) finished() bool { return j.next == len(j.sents) && !j.busy }

// Synthesize splits req.Text into sentences and delivers their chunks in
// order, with Sentence, word offsets and sample positions relative to the
// whole request. Returns ErrBusy (wrapped) when the queue is full, and
// ErrOverCapacity when the pool is at capacity and req is new (not
// req.Continues; PoolOptions.MaxLag).
func (p *Pool) Synthesize(ctx context.Context, req Request, emit func(Chunk) error) error {
	sents := Sentences(req.Text)
	if len(sents) == 0 {
		return fmt.Errorf("%w: no text to speak", ErrInvalidInput)
	}
	jctx, cancel := context.WithCancel(ctx)
	defer cancel()
	queued := time.Now()
	arrived := queued
	if !req.Due.IsZero() {
		arrived = req.Due
	}
	// A new request's listener is waiting from its arrival. One that
	// continues a stream has audio until Due (InHand until dueSlack
	// before), and goes before the new requests that came after it was
	// asked for: a stream already taken is kept going first. At capacity
	// the pool then holds back new requests, which it may refuse, not the
	// streams it took (whose next sentence would otherwise wait until
	// dueSlack before its listener runs out, with no margin for a hiccup).
	// A stream already behind (Due passed) is as far behind as that says.
	due, inHand := arrived, arrived
	if req.Continues {
		inHand = arrived.Add(-dueSlack)
		due = inHand
		if queued.Before(arrived) {
			due = queued.Add(-dueSlack)
		}
	}
	j := &job{ctx: jctx, req: req, sents: sents, cond: sync.NewCond(&p.mu), queued: queued, arrived: arrived,
		due: due, inHand: inHand}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return fmt.Errorf("%w: pool closed", ErrUnavailable)
	case p.stats.Requests >= p.opts.QueueDepth:
		p.stats.Rejected++
		p.mu.Unlock()
		return fmt.Errorf("%w: %d requests in the engine queue", ErrBusy, p.stats.Requests)
	}
	if !req.Continues {
		// Decided with the queue as it is, under the lock that enqueues:
		// a burst is refused beyond what fits, not admitted whole.
		if err := p.admitLocked(queued, true); err != nil {
			p.mu.Unlock()
			return err
		}
	}
	p.stats.Requests++
	p.enqueue(j)
	p.mu.Unlock()
	stopWake := context.AfterFunc(ctx, func() {
		p.mu.Lock()
		j.cond.Broadcast()
		p.mu.Unlock()
	})
	defer stopWake()
	err := p.deliver(j, emit)
	p.mu.Lock()
	j.stop = true
	p.dequeue(j)
	cancel() // stops the sentence in flight, if any
	for j.busy {
		j.cond.Wait()
	}
	p.stats.Requests--
	switch {
	case err == nil:
		p.stats.Completed++
	case ctx.Err() != nil:
		p.stats.Cancelled++
		err = ctx.Err()
	default:
		p.stats.Failed++
	}
	p.mu.Unlock()
	return err
}

// deliver runs on the caller's goroutine: it hands chunks to emit, so a
// slow consumer never holds a worker.
func (p *Pool) deliver(j *job, emit func(Chunk) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(j.chunks) == 0 && j.err == nil && !j.finished() && j.ctx.Err() == nil {
			j.cond.Wait()
		}
		if err := j.ctx.Err(); err != nil {
			return err
		}
		if len(j.chunks) == 0 {
			return j.err // nil when finished
		}
		c := j.chunks[0]
		j.chunks = j.chunks[1:]
		p.mu.Unlock()
		err := emit(c)
		if p.opts.RecycleSamples {
			RecycleSamples(c.Samples)
		}
		p.mu.Lock()
		if err != nil {
			return err
		}
		if c.Last {
			j.ahead--
			if j.parked && j.ahead < maxAhead {
				j.parked = false
				p.enqueue(j)
			}
		}
	}
}

func (p *Pool) enqueue(j *job) {
	if p.closed {
		j.fail(fmt.Errorf("%w: pool closed", ErrUnavailable))
		return
	}
	j.readyAt = time.Now()
	p.ready = append(p.ready, j)
	p.wake.Signal()
}

func (p *Pool) dequeue(j *job) {
	for i, r := range p.ready {
		if r == j {
			p.ready = append(p.ready[:i], p.ready[i+1:]...)
			return
		}
	}
}

// dueSlack is how long before a listener would run out of audio a
// request becomes due: a sentence takes a few milliseconds to render and
// its first chunk must also cross the gateway, so a continuation is not
// left to the last moment, where any queue would mean a gap. A new
// request is due as it arrives: its listener is waiting, but a stream in
// its last dueSlack goes first, so that the new requests a pool at
// capacity holds (up to PoolOptions.MaxLag of them) never make it late.
// A realtime context's next sentence has the same head start over the new
// requests that come after it is asked for.
const dueSlack = 250 * time.Millisecond

// takeEarliest removes and returns the ready job due first. A scan: the
// queue is at most QueueDepth long, and a sentence takes milliseconds.
func (p *Pool) takeEarliest() *job {
	best := 0
	for i, j := range p.ready[1:] {
		if j.due.Before(p.ready[best].due) {
			best = i + 1
		}
	}
	j := p.ready[best]
	p.ready = append(p.ready[:best], p.ready[best+1:]...)
	return j
}

// run is worker i's loop: take the request due first, render its next
// sentence, put it back in line with its new deadline.
func (p *Pool) run(i int) {
	defer p.wg.Done()
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for len(p.ready) == 0 && !p.closed {
			p.wake.Wait()
		}
		if p.closed {
			return
		}
		j := p.takeEarliest()
		idx := j.next
		j.next++
		j.busy = true
		p.stats.Active++
		textLen, before := len(j.sents[idx].Text), j.samples
		p.adm.started(i, textLen, time.Now())
		p.mu.Unlock()
		var waited time.Duration
		if idx == 0 {
			waited = time.Since(j.queued) // read outside the lock
		}
		err := p.sentence(i, j, idx)
		p.mu.Lock()
		if idx == 0 {
			p.stats.Wait.observe(waited)
		}
		p.stats.Active--
		p.stats.Sentences++
		j.busy = false
		var audio float64
		if rate := p.opts.Engine.NativeRate(); rate > 0 {
			audio = float64(j.samples-before) / float64(rate)
			j.due = j.arrived.Add(time.Duration(float64(j.samples)/float64(rate)*float64(time.Second)) - dueSlack)
			j.inHand = j.due
		}
		p.adm.ended(i, textLen, j.req.Continues, audio, err == nil && j.ctx.Err() == nil, time.Now())
		switch {
		case err != nil:
			j.fail(err)
		case j.stop || j.ctx.Err() != nil:
		case j.next < len(j.sents):
			j.ahead++
			if j.ahead < maxAhead {
				p.enqueue(j)
			} else {
				j.parked = true
			}
		default:
			j.ahead++
		}
		j.cond.Broadcast()
	}
}

// sentence renders sentence idx of j on worker i, restarting the worker
// and retrying once if it dies before any audio was delivered.
func (p *Pool) sentence(i int, j *job, idx int) error {
	span := j.sents[idx]
	req := j.req
	req.Text = span.Text
	req.InHand = time.Now().Before(j.inHand)
	for attempt := 0; ; attempt++ {
		w, err := p.worker(i)
		if err != nil {
			return err
		}
		got, samples, words, last := 0, 0, 0, false
		err = w.Synthesize(j.ctx, req, func(c Chunk) error {
			last = c.Last
			c.Sentence = idx
			if len(c.Words) > 0 {
				ws := make([]WordEvent, len(c.Words))
				for k, e := range c.Words {
					e.Index += j.words
					e.TextOffset += span.Start
					e.Sample += j.samples
					ws[k] = e
				}
				c.Words = ws
				words += len(ws)
			}
			samples += len(c.Samples)
			got++
			p.mu.Lock()
			j.chunks = append(j.chunks, c)
			// Wake the caller for a sentence's first chunk, which someone
			// may be waiting for, for its last, and otherwise for batches:
			// a wake-up per chunk costs the process a thread switch each,
			// and later chunks are rendered far ahead of real time anyway.
			if got == 1 || c.Last || len(j.chunks) >= wakeBatch {
				j.cond.Broadcast()
			}
			p.mu.Unlock()
			return nil
		})
		if errors.Is(err, ErrWorkerDied) {
			p.replace(i, w)
			if got == 0 && attempt == 0 && j.ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("engine: sentence %d: %w", idx, err)
		}
		if err != nil {
			return err
		}
		if !last {
			// Consumers and the look-ahead count rely on one Last per
			// sentence; an engine that ended without one gets it here.
			p.mu.Lock()
			j.chunks = append(j.chunks, Chunk{Sentence: idx, Last: true})
			j.cond.Broadcast()
			p.mu.Unlock()
		}
		j.samples += samples
		j.words += words
		return nil
	}
}

// worker returns worker i, starting a replacement if the last one died.
func (p *Pool) worker(i int) (Worker, error) {
	// Both of the worker's dispatchers may find it dead; one starts the
	// replacement, the other then takes it.
	p.starting[i].Lock()
	defer p.starting[i].Unlock()
	p.mu.Lock()
	w := p.workers[i]
	p.mu.Unlock()
	if w != nil {
		return w, nil
	}
	w, err := p.opts.NewWorker(i)
	if err != nil {
		return nil, fmt.Errorf("%w: restart worker %d: %v", ErrUnavailable, i, err)
	}
	p.mu.Lock()
	p.workers[i] = w
	p.stats.Workers++
	p.stats.Restarts++
	p.mu.Unlock()
	return w, nil
}

// replace drops a dead worker; the next sentence on slot i starts a new one.
func (p *Pool) replace(i int, dead Worker) {
	dead.Close()
	p.mu.Lock()
	if p.workers[i] == dead {
		p.workers[i] = nil
		p.stats.Workers--
	}
	p.mu.Unlock()
}
