package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

var (
	errClientGone = web.ErrClientGone
)

func isClientGone(err error) bool { return web.IsClientGone(err) }

// streamQueue is how many flushed pieces may wait for the connection: deep
// enough that the engine never waits on a healthy client, shallow enough
// that a slow one pushes back on the engine.
const streamQueue = 64

// audioStream carries one synthesis from the goroutine that runs it to
// fasthttp, which reads it as a chunked response body (SetBodyStream).
// fasthttp writes and flushes each Read at once, and calls Close when the
// body is done or a write to the client failed: Close cancels the
// synthesis, so the engine stops and the slot is freed at once.
//
// The producer side (Write, Flush, Send) belongs to the synthesis
// goroutine; the reader side (Read, Close) to fasthttp. Pieces travel over
// ch and their buffers come back over free, so a stream allocates a few
// buffers, not one per event.
type audioStream struct {
	ch     chan []byte
	free   chan []byte
	gone   chan struct{} // closed by Close
	first  chan struct{} // closed at the first Flush, or at the end without one
	cancel context.CancelFunc
	closed func() // called once, by Close: the stream stops counting as running work
	once   sync.Once

	// producer side
	pending   []byte
	sent      bool  // something was flushed
	selfEnded bool  // the bytes carry their own end (SSE done or error)
	runErr    error // the failure, when it came before anything was sent
	abort     error // the failure after bytes were sent: the reader fails with it

	// reader side
	cur, curBuf []byte
	handed      bool // the first piece was handed to fasthttp
	// conn, when set, has a write deadline at least idle after every
	// Read: the response may run as long as the client keeps taking it
	// (fasthttp's WriteTimeout otherwise bounds the whole response).
	// moved is when the deadline was last set (see slide).
	conn  net.Conn
	idle  time.Duration
	moved time.Time
	// hangup watches the client's socket while the body streams, so
	// that a client that leaves stops the synthesis at once. It starts
	// at the Read after the first piece (watch holds the socket until
	// then): its goroutine, started before the first write, cost that
	// write a few microseconds, and the socket is written to at once
	// anyway. Atomic: the watch's own goroutine may call Close before
	// Read has stored it.
	watch  net.Conn
	hangup atomic.Pointer[hangupWatch]
}

// watchClient stops the synthesis as soon as the client closes conn,
// not only when a write to it fails.
func (st *audioStream) watchClient(conn net.Conn) { st.watch = conn }

// slidingDeadline makes the stream keep conn's write deadline at least
// idle ahead of every piece it hands over. set is when conn's deadline was
// last set at least idle+idle/deadlineSteps ahead (zero: not known to be):
// until then the pieces need no move of their own.
func (st *audioStream) slidingDeadline(conn net.Conn, idle time.Duration, set time.Time) {
	if idle > 0 {
		st.conn, st.idle, st.moved = conn, idle, set
	}
}

// deadlineSteps: a stream moves its write deadline at most this many times
// per idle period, each time to idle+idle/deadlineSteps ahead, so that
// every write has between idle and idle+idle/deadlineSteps (60-63.75 s).
// Moving it at every piece costs more than its call (BenchmarkStreamDeadline:
// about 0.7 us a piece): a timer moved while no other is due sooner wakes
// the network poller or an idle P (runtime.wakeNetPoller), a thread that
// then competes with the client for a CPU. SSE streams got their sliding
// deadline with the core, the one change on their path to the first byte
// that the other transports did not have (issue 25).
const deadlineSteps = 16

// slide moves the write deadline when the last move is idle/deadlineSteps
// old.
func (st *audioStream) slide() {
	now := time.Now()
	if now.Sub(st.moved) < st.idle/deadlineSteps {
		return
	}
	st.conn.SetWriteDeadline(now.Add(st.idle + st.idle/deadlineSteps))
	st.moved = now
}

// startStream runs run in a goroutine that owns job, and returns when
// run has flushed its first bytes: the caller then answers 200 with the
// stream as its body. When run failed before any byte it returns run's
// error instead, for the caller to answer with a status.
func (s *Server) startStream(job *web.Job, series *telemetry.Series, run web.StreamFunc) (*audioStream, error) {
	// The stream counts as running work for a shutdown until it is closed
	// (drain.go); the handler that starts it is counted already, so the
	// count cannot be refused here.
	s.drain.active.Add(1)
	synthStart := s.traceClock()
	if rs := traceOf(job).rs; rs != nil {
		rs.refs.Add(1) // the stream ends the request's span too
	}
	rctx, cancel := context.WithCancel(s.drain.streamContext())
	st := &audioStream{
		ch: make(chan []byte, streamQueue), free: make(chan []byte, streamQueue),
		gone: make(chan struct{}), first: make(chan struct{}), cancel: cancel,
		closed: s.drain.leave,
	}
	// Before the goroutine starts: the handler then parks at once, and
	// the goroutine runs on this thread rather than being taken by an idle
	// one (which waits 3 us before it steals a runnext goroutine).
	t := time.NewTimer(firstAudioTimeout)
	defer t.Stop()
	go func() {
		growStack()
		defer cancel()
		var res synth.Result
		var err error
		func() {
			defer func() {
				if v := recover(); v != nil {
					err = fmt.Errorf("gateway: panic in synthesis: %v", v)
				}
			}()
			res, err = run(rctx, st)
		}()
		// Cut by the end of the grace: the body must not end as if whole.
		err = s.drain.cause(rctx, err)
		job.Finish(res.Samples)
		s.outcome(series, err)
		s.streamEnded(job, series, err)
		if err != nil && !isClientGone(err) && control.ErrorCode(err) == control.EInternal {
			s.log.Error("synthesis failed", "dialect", series.Dialect(), "transport", series.Transport(), "err", err)
		}
		st.finish(err)
	}()
	select {
	case <-st.first:
	case <-t.C:
		// An engine that neither yields nor fails: give up on it (Close
		// cancels it; the goroutine frees the slot when it returns).
		st.Close()
		return nil, errEngineStalled
	}
	if !st.sent && st.runErr != nil {
		st.Close() // never handed to fasthttp, which would close it
		return nil, st.runErr
	}
	s.firstAudio(job, series, synthStart)
	return st, nil
}

// growStack grows the calling goroutine's stack to 16 KiB at once. A
// synthesis goroutine starts small, and the first request to an upstream
// engine (synth.Run, the engine, its HTTP exchange) grew it twice on the
// way to the first audio byte, each time copying a deeper stack: about
// 10 us each with the caches cold, as they are between requests, against
// half that for one copy of two frames here (gateway-side stamps, 64
// streams; 16 KiB covers the path to the first audio). Goroutines that
// need more grow as usual.
//
//go:noinline
func growStack() {
	var pad [7 << 10]byte // with the guard, more than 8 KiB: the stack doubles to 16
	keep(pad[:])
}

//go:noinline
func keep([]byte) {}

// firstAudioTimeout bounds the wait for an engine's first audio; a request
// that waited this long is answered 502 upstream_error.
const firstAudioTimeout = 2 * time.Minute

var errEngineStalled = &control.Error{Code: control.EUpstreamError, Message: "the synthesis engine did not start in time"}

// Write queues b for the next Flush (SSEWriter writes an event, then
// flushes).
func (st *audioStream) Write(b []byte) (int, error) {
	st.pending = append(st.pending, b...)
	return len(b), nil
}

// Send queues b and flushes: a synth.Sink for raw audio.
func (st *audioStream) Send(b []byte) error {
	st.pending = append(st.pending, b...)
	return st.Flush()
}

// Flush hands what is queued to the connection; errClientGone once the
// response is closed.
func (st *audioStream) Flush() error {
	if len(st.pending) == 0 {
		return nil
	}
	select {
	case <-st.gone:
		return errClientGone
	default:
	}
	select {
	case st.ch <- st.pending:
	case <-st.gone:
		return errClientGone
	}
	select {
	case b := <-st.free:
		st.pending = b[:0]
	default:
		st.pending = nil
	}
	if !st.sent {
		st.sent = true
		close(st.first)
		// The handler just woken waits in this P's next slot while an
		// engine that computes without blocking keeps the P: let it run
		// now, the first byte is what this path is measured by. Later
		// flushes do not yield: Gosched goes through the scheduler's
		// global lock, which hundreds of streams then contend for.
		runtime.Gosched()
	}
	return nil
}

// finish ends the producer side. err after bytes were sent makes the body
// fail (the client sees a truncated response) unless the bytes carry their
// own end.
func (st *audioStream) finish(err error) {
	if !st.sent {
		st.runErr = err
		close(st.first)
	} else if !st.selfEnded && !isClientGone(err) {
		st.abort = err
	}
	close(st.ch)
}

// Read gives fasthttp the next queued bytes, waiting for the first and
// taking whatever else is already queued; the stream's first piece alone.
func (st *audioStream) Read(p []byte) (int, error) {
	if st.handed && st.watch != nil {
		st.hangup.Store(watchHangup(st.watch, func() { st.Close() }))
		st.watch = nil
	}
	n := 0
	for n < len(p) {
		if len(st.cur) == 0 {
			if st.curBuf != nil {
				select {
				case st.free <- st.curBuf[:0]:
				default:
				}
				st.curBuf = nil
			}
			var b []byte
			var ok bool
			if n == 0 {
				b, ok = <-st.ch
			} else {
				select {
				case b, ok = <-st.ch:
				default:
					return n, nil
				}
			}
			if !ok {
				switch {
				case n > 0:
					return n, nil
				case st.abort != nil:
					return 0, st.abort
				}
				return 0, io.EOF
			}
			st.cur, st.curBuf = b, b
		}
		if n == 0 && st.conn != nil {
			st.slide()
		}
		c := copy(p[n:], st.cur)
		st.cur = st.cur[c:]
		n += c
		if !st.handed {
			// The first piece goes out alone. Taking what else is queued
			// kept the first byte waiting while a fast engine queued
			// more: the first Read filled fasthttp's 4 KiB buffer from
			// the reference engine's chunks before returning, 58 us at
			// the median at one stream, half the server's whole time to
			// first byte (97 -> 56 us, speak, the engine unpaced). Later
			// Reads batch, which saves writes when a client falls behind.
			st.handed = true
			break
		}
	}
	return n, nil
}

// Sent reports that something was flushed (web.Stream).
func (st *audioStream) Sent() bool { return st.sent }

// SelfEnded notes that the bytes carry their own end (web.Stream).
func (st *audioStream) SelfEnded() { st.selfEnded = true }

// Close is called by fasthttp when the body is done or the client is gone;
// it stops the synthesis if it still runs.
func (st *audioStream) Close() error {
	st.once.Do(func() {
		close(st.gone)
		st.cancel()
		if st.closed != nil {
			st.closed()
		}
	})
	// fasthttp calls Close before it reads the connection again: the
	// watch is over, and the read deadline cleared, by then.
	st.hangup.Load().stop()
	return nil
}

var (
	_ io.ReadCloser = (*audioStream)(nil)
	_ web.Stream    = (*audioStream)(nil)
)
