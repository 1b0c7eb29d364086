package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// sample is the outcome of one operation (one request, or one ws context).
type sample struct {
	start time.Time     // just before the request was written
	ttfb  time.Duration // 0 when no audio arrived
	total time.Duration
	audio float64   // seconds of audio delivered
	gaps  []float64 // inter-chunk gaps in ms
	err   string    // "" on success; otherwise a key of Result.Errors
	// serverTTFB is the server's own TTFB in ms when it reports one (ws
	// task_done profile: task_start read to first chunk queued); 0 if not.
	serverTTFB float64
	// refused: the server turned the operation away for capacity (503
	// upstream_busy, or on ws task_failed upstream_busy before any audio):
	// an answer to too much load, counted apart from ok and errors, after
	// which the worker waits retryAfter (the server's, else
	// refusalBackoff) as a well-behaved client does. total is then the
	// time the refusal took.
	refused    bool
	retryAfter time.Duration
}

// scenario is one transport's client. do must honour ctx (the per-operation
// timeout) and never panic on bad server input; failures are samples.
type scenario interface {
	// open prepares long-lived resources for slots concurrent operations.
	open(ctx context.Context, slots int) error
	// do runs one operation on slot (0 <= slot < slots); slots are never
	// used by two operations at once.
	do(ctx context.Context, slot int) sample
	close()
}

// loadSpec bounds a run in count and time.
type loadSpec struct {
	concurrency int           // closed loop: workers; open loop: slots in flight
	rate        float64       // > 0 selects open loop
	duration    time.Duration // measured window; 0 with requests > 0
	requests    int           // measured operations; 0 = by duration
	warmup      time.Duration
	timeout     time.Duration // per operation
	maxTime     time.Duration // hard cap on issuing when only requests bound the run
	pace        bool          // closed loop: next start >= previous start + its audio
}

// recorder folds samples into figures under one mutex; contention is low
// because an operation takes milliseconds at least.
type recorder struct {
	measureStart time.Time

	mu      sync.Mutex
	ttfb    *reservoir
	total   *reservoir
	gaps    *reservoir
	srvTTFB *reservoir
	rtf     *reservoir
	refusal *reservoir // ms from the request to its refusal
	refused int
	audio   float64
	wallSum float64
	ops, ok int
	errors  map[string]int
	// The rate window runs from the first measured start to the last measured
	// end: a closed-loop worker busy with a warm-up operation starts measuring
	// late, and counting that wait would understate the rates.
	firstStart time.Time
	lastEnd    time.Time
	recent     []float64 // TTFB ms since the last progress line
	inflight   atomic.Int64
}

const reservoirCap = 1 << 20

// errorPause is how long a closed-loop worker waits after a failed operation.
const errorPause = 50 * time.Millisecond

func newRecorder(measureStart time.Time) *recorder {
	return &recorder{
		measureStart: measureStart,
		ttfb:         newReservoir(reservoirCap),
		total:        newReservoir(reservoirCap),
		gaps:         newReservoir(reservoirCap),
		srvTTFB:      newReservoir(reservoirCap),
		rtf:          newReservoir(reservoirCap),
		refusal:      newReservoir(reservoirCap),
		errors:       map[string]int{},
	}
}

// add records one finished operation; warm-up operations only feed progress.
func (r *recorder) add(s sample, measured bool) {
	end := s.start.Add(s.total)
	r.mu.Lock()
	defer r.mu.Unlock()
	if s.err == "" && s.ttfb > 0 {
		r.recent = append(r.recent, Ms(s.ttfb))
	}
	if !measured {
		return
	}
	r.ops++
	if end.After(r.lastEnd) {
		r.lastEnd = end
	}
	if r.firstStart.IsZero() || s.start.Before(r.firstStart) {
		r.firstStart = s.start
	}
	if s.refused {
		r.refused++
		r.refusal.add(Ms(s.total))
		return
	}
	if s.err != "" {
		r.errors[s.err]++
		return
	}
	r.ok++
	if s.ttfb > 0 {
		r.ttfb.add(Ms(s.ttfb))
	}
	if s.serverTTFB > 0 {
		r.srvTTFB.add(s.serverTTFB)
	}
	r.total.add(Ms(s.total))
	for _, g := range s.gaps {
		r.gaps.add(g)
	}
	r.audio += s.audio
	r.wallSum += s.total.Seconds()
	if s.audio > 0 {
		r.rtf.add(RTF(s.total, s.audio))
	}
}

// addError counts a failure that is not an operation (an open-loop arrival
// dropped for want of a slot, a ws session-level error frame).
func (r *recorder) addError(key string) {
	r.mu.Lock()
	r.errors[key]++
	r.mu.Unlock()
}

// fill writes the figures into res.
func (r *recorder) fill(res *Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	res.Operations = r.ops
	res.OK = r.ok
	res.Errors = map[string]int{}
	for k, v := range r.errors {
		res.Errors[k] = v
		res.ErrorCount += v
	}
	res.TTFB = r.ttfb.dist()
	res.ttfbRaw = append([]float64(nil), r.ttfb.xs...)
	sort.Float64s(res.ttfbRaw)
	res.Total = r.total.dist()
	res.Gap = r.gaps.dist()
	res.ServerTTFB = r.srvTTFB.dist()
	res.Refused = r.refused
	res.Refusal = r.refusal.dist()
	res.RTFp50 = r.rtf.dist().P50
	if r.audio > 0 {
		res.RTFAggregate = r.wallSum / r.audio
	}
	res.AudioSeconds = r.audio
	var elapsed time.Duration
	if r.ops > 0 {
		elapsed = r.lastEnd.Sub(r.firstStart)
	}
	res.Elapsed = elapsed.Seconds()
	res.AudioPerSec = Rate(r.audio, elapsed)
	res.Throughput = Rate(float64(r.ops), elapsed)
}

// progressLine summarises the last second; it drains the recent window.
func (r *recorder) progressLine(label string, since time.Duration) string {
	r.mu.Lock()
	recent := r.recent
	r.recent = nil
	ops, errs, refused := r.ops, 0, r.refused
	for _, v := range r.errors {
		errs += v
	}
	r.mu.Unlock()
	phase := ""
	if time.Now().Before(r.measureStart) {
		phase = " warm-up"
	}
	ttfb := "-"
	if d := Summarize(recent); d.N > 0 {
		ttfb = fmt.Sprintf("p50 %.1fms p99 %.1fms", d.P50, d.P99)
	}
	busy := ""
	if refused > 0 {
		busy = fmt.Sprintf("  refused %d", refused)
	}
	return fmt.Sprintf("%s%s %5.1fs  done %d  err %d%s  inflight %d  ttfb(1s) %s",
		label, phase, since.Seconds(), ops, errs, busy, r.inflight.Load(), ttfb)
}

// drive runs sc under spec and returns once every operation it started has
// ended. Progress goes to progress (nil: none) every second, overwriting one
// line with \r.
func drive(ctx context.Context, sc scenario, spec loadSpec, label string, progress io.Writer) *recorder {
	// Closed-loop workers start spread evenly over a ramp, so that operations
	// of equal length do not run in lockstep (every worker asking at the same
	// instant, once per operation), which no population of independent
	// callers does. The ramp is the warm-up; paced workers are spread over
	// one operation's audio instead (learnt from one unmeasured operation),
	// as listeners that started at random moments are.
	ramp := spec.warmup
	warmup := spec.warmup
	if spec.pace && spec.rate <= 0 {
		ramp = audioPeriod(ctx, sc, spec.timeout)
		// Measure once every listener has started: during the ramp the
		// load is still growing and sessions are being opened.
		warmup = max(warmup, ramp)
	}
	start := time.Now()
	measureStart := start.Add(warmup)
	rec := newRecorder(measureStart)
	issueEnd := measureStart.Add(spec.duration)
	if spec.duration <= 0 {
		issueEnd = measureStart.Add(spec.maxTime)
	}
	// Past the issue window plus one operation timeout nothing can still be
	// running legitimately; this cancels stragglers whatever they do.
	hardCtx, cancel := context.WithDeadline(ctx, issueEnd.Add(spec.timeout+5*time.Second))
	defer cancel()

	stopProgress := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		if progress == nil {
			return
		}
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopProgress:
				fmt.Fprintf(progress, "\r%-100s\r", "")
				return
			case now := <-t.C:
				fmt.Fprintf(progress, "\r%-100s", rec.progressLine(label, now.Sub(start)))
			}
		}
	}()

	var tickets atomic.Int64
	tickets.Store(int64(spec.requests))
	// claim decides whether an operation starting now may run, and whether it
	// is measured.
	claim := func(now time.Time) (run, measured bool) {
		if hardCtx.Err() != nil || !now.Before(issueEnd) {
			return false, false
		}
		measured = !now.Before(measureStart)
		if measured && spec.requests > 0 && tickets.Add(-1) < 0 {
			return false, false
		}
		return true, measured
	}
	runOne := func(slot int, measured bool) sample {
		rec.inflight.Add(1)
		opCtx, opCancel := context.WithTimeout(hardCtx, spec.timeout)
		s := sc.do(opCtx, slot)
		opCancel()
		rec.inflight.Add(-1)
		rec.add(s, measured)
		return s
	}

	var wg sync.WaitGroup
	if spec.rate <= 0 {
		for i := 0; i < spec.concurrency; i++ {
			wg.Add(1)
			go func(slot int) {
				defer wg.Done()
				if d := ramp * time.Duration(slot) / time.Duration(spec.concurrency); d > 0 {
					select {
					case <-hardCtx.Done():
						return
					case <-time.After(d):
					}
				}
				for {
					ok, measured := claim(time.Now())
					if !ok {
						return
					}
					s := runOne(slot, measured)
					var pause time.Duration
					switch {
					case s.refused:
						// Back off as the server asked, spread a little
						// so that the refused do not come back at once.
						pause = jitter(s.retryAfter)
						pause = min(pause, time.Until(issueEnd))
					case s.err != "":
						// A failing server answers at once; without a pause the
						// workers become a hot loop on the cores it shares.
						pause = errorPause
					case spec.pace && s.audio > 0:
						// The listener is still playing the audio.
						pause = time.Until(s.start.Add(time.Duration(s.audio * float64(time.Second))))
						pause = min(pause, time.Until(issueEnd))
					}
					if pause > 0 {
						select {
						case <-hardCtx.Done():
						case <-time.After(pause):
						}
					}
				}
			}(i)
		}
	} else {
		openLoop(hardCtx, spec, claim, runOne, rec, &wg)
	}
	wg.Wait()
	close(stopProgress)
	<-progressDone
	return rec
}

// jitter is d and up to half of it again, drawn at random: a client never
// comes back before the Retry-After it was given, and the refused of one
// instant spread over the next half period instead of returning together.
func jitter(d time.Duration) time.Duration {
	return d + rand.N(d/2+1)
}

// audioPeriod runs one unmeasured operation and returns its audio duration
// (1 s if it failed or carried no audio).
func audioPeriod(ctx context.Context, sc scenario, timeout time.Duration) time.Duration {
	opCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if s := sc.do(opCtx, 0); s.err == "" && s.audio > 0 {
		return time.Duration(s.audio * float64(time.Second))
	}
	return time.Second
}

// openLoop schedules arrivals every 1/rate from a fixed clock: if the
// scheduler wakes late it catches up at once, so a slow server cannot lower
// the offered load (no coordinated omission).
func openLoop(ctx context.Context, spec loadSpec, claim func(time.Time) (bool, bool),
	runOne func(int, bool) sample, rec *recorder, wg *sync.WaitGroup) {
	slots := make(chan int, spec.concurrency)
	for i := 0; i < spec.concurrency; i++ {
		slots <- i
	}
	interval := time.Duration(float64(time.Second) / spec.rate)
	next := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if d := time.Until(next); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		}
		ok, measured := claim(next)
		if !ok {
			return
		}
		select {
		case slot := <-slots:
			wg.Add(1)
			go func() {
				defer wg.Done()
				runOne(slot, measured)
				slots <- slot
			}()
		default:
			if measured {
				rec.addError("client:dropped")
			}
		}
		next = next.Add(interval)
	}
}
