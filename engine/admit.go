package engine

import (
	"fmt"
	"math"
	"time"
)

// Graceful overload. Past its real-time capacity a pool that takes every
// request makes every stream late: the queue grows, first audio waits
// seconds and streams stall mid-way (espeak on 2 cores: about 1,000
// realtime streams hold; at 1,200 the first audio waited 1.2 s, and at
// 1,500 throughput fell). So a pool with PoolOptions.MaxLag refuses new
// requests, at once and without queueing them, while taking them would
// leave admitted work more than MaxLag behind schedule; the streams it took
// keep their deadlines, and the excess gets 503 upstream_busy with
// Retry-After (or, on the realtime WebSocket, task_failed upstream_busy)
// and can go elsewhere or come back.
//
// "Behind schedule" is read two ways, and the larger wins:
//
//   - predicted: the work a new request would wait behind (the sentences
//     workers hold, and those ready and already due) in busy worker-seconds
//     per worker, stretched by the share of the workers that streams
//     already taken will claim meanwhile (their next sentences go first,
//     see below: with half the capacity going to them, a new request waits
//     twice as long as the queue ahead of it says). The cost of a sentence
//     and that share are learned from the pool's own renders (busy worker
//     time per byte of text; bytes of continuations rendered a second:
//     moving averages), so they follow what the engine gets of the CPU
//     under the current load, not a figure measured once on an idle
//     machine. Prediction catches a burst (a thousand task_starts at once)
//     before it is queued.
//   - measured: how long the most overdue sentence in the queue has waited
//     past its deadline (its lag). It needs no cost model, so it covers
//     what the model misses (a sudden change in load, text much slower to
//     render than its length says).
//
// Hysteresis: the pool starts refusing once behind by more than MaxLag and
// stops once back within MaxLag/2, so that under a steady overload it
// admits in bursts between the two instead of flipping on every request.
//
// Continuations (Request.Continues) are never refused: a listener who has
// part of a stream must get the rest. And they go first: a realtime
// context's next sentence is due dueSlack before it is asked for, where a
// new request is due as it arrives, so at capacity the queue the pool
// holds is of new requests (at most MaxLag of them, then refused), not of
// the sentences of streams it took. (Due only dueSlack before its listener
// ran out, as the rest of a long HTTP text is, a stream's next sentence
// would wait at capacity until then: no audible gap, but its audio would
// arrive a second late in a burst, with no margin left for a hiccup.)

// Admitter is an engine that refuses new work when taking it would make the
// work it already took late. Admit answers at once and queues nothing: nil
// when a new request would be taken now; otherwise ErrOverCapacity or
// another ErrBusy (wrapped, with RetryAfterSeconds when it knows when to
// come back), or ErrUnavailable. A transport asks before it opens something
// long-lived that has no request of its own yet (a realtime session, a
// context), so that the refusal answers what opened it; the request itself
// is still checked when it comes, since others may have come first.
type Admitter interface {
	Admit() error
}

// Admit asks e whether it would take a new request now; an engine that is
// no Admitter always would.
func Admit(e Engine) error {
	if a, ok := e.(Admitter); ok {
		return a.Admit()
	}
	return nil
}

// ErrOverCapacity: the pool refused a new request because taking it would
// make the work it already took late (PoolOptions.MaxLag). It is an ErrBusy.
// Trying again at once does not help: come back after its Retry-After.
var ErrOverCapacity = fmt.Errorf("%w: at capacity", ErrBusy)

// capacityError is a refusal with how far behind the pool was.
type capacityError struct {
	behind time.Duration
	retry  int // seconds, at least 1
}

func (e *capacityError) Error() string {
	return fmt.Sprintf("%v: admitted work is %v behind schedule", ErrOverCapacity, e.behind.Round(time.Millisecond))
}

func (e *capacityError) Unwrap() error { return ErrOverCapacity }

// RetryAfterSeconds: once the work ahead has been done, in whole seconds
// (at least 1; more under sustained overload, see retryAfter), which is
// how synth.EngineError sets Retry-After.
func (e *capacityError) RetryAfterSeconds() int {
	return max(e.retry, int(math.Ceil(e.behind.Seconds())))
}

// Learning the cost of a sentence: every learnBusy of busy worker time, the
// busy time per byte of text rendered in it is folded into the average
// with weight learnWeight. Sentences take milliseconds, so a step is tens
// of them, and the average follows a change of load within a few hundred
// milliseconds.
const (
	learnBusy   = 25 * time.Millisecond
	learnWeight = 0.25
)

// admission is a pool's graceful-overload state, guarded by Pool.mu.
type admission struct {
	refusing bool
	behind   time.Duration // at the last check, for Stats

	// The share of new requests refused, a moving average over windows of
	// pressureWindow (window: when the current one began; asked, refused:
	// counted in it), sets the Retry-After of a refusal (retryAfter).
	window          time.Time
	asked, declined int
	pressure        float64

	// cost is the busy worker time a byte of sentence text takes, in
	// seconds (0 until learned: only the measured lag counts until then);
	// rate the audio seconds a busy worker renders a second, for Stats;
	// share the part of the workers' time continuations take.
	cost, rate, share float64

	// held[i] is how many sentences worker i holds (several with
	// WorkerDepth > 1), since[i] since when its busy time was last counted.
	held  []int
	since []time.Time
	// Counted since the last learning step (from since0): busy worker
	// time, bytes of text (of them, of continuations) and audio seconds
	// rendered.
	since0    time.Time
	busy      time.Duration
	bytes     int
	contBytes int
	audio     float64
	// inflight is the bytes of text of the sentences workers hold.
	inflight int
}

func newAdmission(workers int) admission {
	return admission{held: make([]int, workers), since: make([]time.Time, workers)}
}

// started: worker i took a sentence of n bytes.
func (a *admission) started(i int, n int, now time.Time) {
	if a.held[i] == 0 {
		a.since[i] = now
	}
	a.held[i]++
	a.inflight += n
}

// ended: worker i is done with a sentence of n bytes (continues: of a
// stream already taken) that rendered audio seconds (ok: completely; a
// failed or cancelled one teaches nothing, but its time is not counted for
// the next).
func (a *admission) ended(i int, n int, continues bool, audio float64, ok bool, now time.Time) {
	a.held[i]--
	a.inflight -= n
	busy := now.Sub(a.since[i])
	a.since[i] = now
	if !ok {
		return
	}
	if a.since0.IsZero() {
		a.since0 = now.Add(-busy)
	}
	a.busy += busy
	a.bytes += n
	a.audio += audio
	if continues {
		a.contBytes += n
	}
	if a.busy < learnBusy || a.bytes == 0 {
		return
	}
	cost := a.busy.Seconds() / float64(a.bytes)
	rate := a.audio / a.busy.Seconds()
	share := 0.0
	if wall := now.Sub(a.since0).Seconds(); wall > 0 {
		// Worker-seconds of continuations per second of all the workers.
		share = min(float64(a.contBytes)*cost/(wall*float64(len(a.held))), 1)
	}
	if a.cost == 0 {
		a.cost, a.rate, a.share = cost, rate, share
	} else {
		a.cost += learnWeight * (cost - a.cost)
		a.rate += learnWeight * (rate - a.rate)
		a.share += learnWeight * (share - a.share)
	}
	a.busy, a.bytes, a.contBytes, a.audio, a.since0 = 0, 0, 0, 0, time.Time{}
}

// behindLocked is how late a new request arriving now would start: the
// larger of the predicted wait (the bytes workers hold and those of the
// ready sentences already due, at the learned cost, shared by the workers)
// and the measured lag (how long the most overdue ready sentence has been
// overdue, counted from when it was queued: a listener who sent text after
// the audio ran out is not the pool's lateness).
func (p *Pool) behindLocked(now time.Time) time.Duration {
	bytes := p.adm.inflight
	var lag time.Duration
	for _, j := range p.ready {
		if j.due.After(now) {
			continue // a continuation with audio in hand: it goes after a new request
		}
		bytes += len(j.sents[j.next].Text)
		since := j.due
		if j.readyAt.After(since) {
			since = j.readyAt
		}
		lag = max(lag, now.Sub(since))
	}
	// What the workers have left for new requests; at least a tenth, so
	// that a pool busy with streams still predicts a finite wait.
	free := float64(max(1, p.stats.Workers)) * max(1-p.adm.share, 0.1)
	wait := time.Duration(float64(bytes) * p.adm.cost / free * float64(time.Second))
	return max(wait, lag)
}

// admitLocked decides whether a new request arriving now is taken, and
// counts a refusal. ask is true for the request itself, false for a check
// before something opens (Admit), which is counted in the refused share
// only when it refuses: what it lets through is counted when its request
// comes.
func (p *Pool) admitLocked(now time.Time, ask bool) error {
	if p.opts.MaxLag <= 0 {
		return nil
	}
	behind := p.behindLocked(now)
	p.adm.behind = behind
	p.adm.refusing = refuse(p.adm.refusing, behind, p.opts.MaxLag)
	if ask || p.adm.refusing {
		p.adm.count(p.adm.refusing, now)
	}
	if !p.adm.refusing {
		return nil
	}
	p.stats.Refused++
	return &capacityError{behind: behind, retry: p.adm.retryAfter()}
}

// pressureWindow is how often the refused share is folded into the
// average: long enough to hold many requests, short enough to follow a
// change of load within seconds.
const pressureWindow = 500 * time.Millisecond

// count records a new request's fate for the refused share.
func (a *admission) count(refused bool, now time.Time) {
	if now.Sub(a.window) >= pressureWindow {
		if a.asked > 0 {
			a.pressure = 0.5*a.pressure + 0.5*float64(a.declined)/float64(a.asked)
		} else {
			a.pressure = 0
		}
		a.window, a.asked, a.declined = now, 0, 0
	}
	a.asked++
	if refused {
		a.declined++
	}
}

// maxRetryAfter bounds the Retry-After of a refusal for capacity.
const maxRetryAfter = 8

// retryAfter: 1 s while few are refused, growing as the refused share p
// grows, as 1/(1-p): at three times capacity two in three are refused,
// and asking them back every 3 s instead of every second keeps the work of
// refusing them (parsing, answering, the client's retries) from taking
// the CPU the admitted streams need (espeak-ng on 2 cores at 3x: 4,000
// refusals a second cost 10% of the throughput).
func (a *admission) retryAfter() int {
	if a.pressure >= 1-1.0/maxRetryAfter {
		return maxRetryAfter
	}
	return max(1, min(maxRetryAfter, int(math.Round(1/(1-a.pressure)))))
}

// refuse is the hysteresis: whether a pool that was refusing (or not) and
// is behind by behind refuses new requests.
func refuse(refusing bool, behind, maxLag time.Duration) bool {
	switch {
	case behind > maxLag:
		return true
	case behind <= maxLag/2:
		return false
	}
	return refusing
}

// Admit reports whether a new request would be taken now: ErrUnavailable
// (wrapped) once the pool is closed, ErrBusy when its queue is full,
// ErrOverCapacity when taking it would make admitted work late. A refusal
// for capacity is counted like a refused request (PoolStats.Refused).
func (p *Pool) Admit() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.readyLocked(); err != nil {
		return err
	}
	return p.admitLocked(time.Now(), false)
}

var _ Admitter = (*Pool)(nil)
