package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"voicesvc/control"
	"voicesvc/netpoll"
)

// A session served by Serve has no goroutine while it waits for its
// client: its socket is watched by the server's one netpoll.Poller, and a
// goroutine exists only while there is something to do. The reader's is
// started when the socket has input (or when the session must end: abort,
// idle timeout); it reads what is there, handles every message it
// completes, and returns once a read would block, after re-arming the
// watch. The writer's and the runners' exist while there is something to
// send or to synthesize (writer.go, task.go).
//
// One reader at a time: a reader is started only by the wake that flips
// parked from true to false, and only a reader sets parked, as the last
// thing it does with the session (its Arm aside). Whatever makes a parked
// session need its reader (abort, the idle deadline) is decided under
// s.mu, and a reader decides to park under s.mu after checking both, so no
// wake-up is lost. Input needs no such care: the watch is level-triggered,
// so input that arrives after the reader's last read fires when it arms.
type polled struct {
	poller    *netpoll.Poller // set under s.mu; nil: Run's deadlines
	watch     *netpoll.Watch
	rc        syscall.RawConn
	parked    atomic.Bool // no reader runs; the next wake starts one
	idleTimer *time.Timer // fires at the idle deadline (onIdle)
	idleSet   bool        // idleTimer is armed; guarded by s.mu
	pending   []byte      // Serve's buffered bytes, until the first reader takes them
	done      func(error)
}

// Serve serves the session as Run does, but returns at once and keeps no
// goroutine while the session waits for its client: p watches the socket.
// done is called once, on one of the session's goroutines, with what Run
// would have returned, when every goroutine the session started has
// stopped and every refund is made; the caller closes conn then (not
// before). A panic in the session ends it: done gets the panic as error,
// and the caller's closing of conn stops what may still run.
//
// buffered are bytes the client sent right behind its handshake that were
// read from the socket before the session began; they are decoded before
// the socket is read. conn must hold no bytes read ahead of its own (see
// Run).
//
// When p is nil, or conn.NetConn() has no syscall.RawConn (TLS, a
// wrapper), Serve runs Run's blocking reads on a goroutine instead.
func (x *Session) Serve(ctx context.Context, p *netpoll.Poller, buffered []byte, done func(error)) {
	s := x.s
	s.done = done
	var rc syscall.RawConn
	if sc, ok := s.nc.(syscall.Conn); ok && p != nil {
		rc, _ = sc.SyscallConn()
	}
	if rc == nil {
		go s.runBlocking(ctx, buffered)
		return
	}
	// Armed from here; ready does nothing until the first reader parks.
	w, err := p.Watch(rc, s.ready)
	if err != nil {
		s.log.Warn("websocket session not polled", "err", err)
		go s.runBlocking(ctx, buffered)
		return
	}
	s.rc, s.pending, s.watch = rc, buffered, w
	// Under the lock: Revoke or Drain may already be running (the
	// registry), and setDeadlineLocked reads poller.
	s.mu.Lock()
	s.poller = p
	s.idleTimer = time.AfterFunc(s.cfg.IdleTimeout, s.onIdle)
	s.idleSet = true
	s.mu.Unlock()
	s.begin(ctx)
	go s.service() // the first reader: buffered bytes, then the socket
}

// runBlocking is Serve without a poller.
func (s *session) runBlocking(ctx context.Context, buffered []byte) {
	var err error
	defer func() {
		if v := recover(); v != nil {
			err = s.crashed(v)
		}
		s.done(err)
	}()
	s.begin(ctx)
	err = s.readLoop(buffered)
}

// ready is the poller's call: the socket has input (or was shut down).
func (s *session) ready() {
	if s.parked.CompareAndSwap(true, false) {
		go s.service()
	}
}

// wakeLocked starts a reader for a parked session, so that it sees what
// changed (abort, the idle deadline).
func (s *session) wakeLocked() {
	if s.parked.CompareAndSwap(true, false) {
		go s.service()
	}
}

// service is a reader's goroutine.
func (s *session) service() {
	end, err := false, error(nil)
	defer func() {
		if v := recover(); v != nil {
			end, err = true, s.crashed(v)
		}
		if end {
			s.done(err)
		}
	}()
	end, err = s.serve()
}

// crashed stops the session's reading after a panic and logs it.
func (s *session) crashed(v any) error {
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.stopPolling()
	s.log.Error("panic in websocket session", "panic", v, "stack", string(debug.Stack()))
	return fmt.Errorf("sessions: panic: %v", v)
}

// errWouldBlock: the socket has nothing to read now.
var errWouldBlock = errors.New("sessions: no input")

// serve reads until a read would block, then parks the session; end
// reports that it ended instead (err is Run's result).
func (s *session) serve() (end bool, err error) {
	if p := s.pending; p != nil {
		s.pending = nil
		if end, err := s.consume(p); end {
			return true, err
		}
	}
	for {
		if s.aborted() {
			return true, s.endAborted()
		}
		b := getSockBuf()
		n, err := s.readNow(b[:])
		if n > 0 {
			end, err := s.consume(b[:n])
			putSockBuf(b)
			if end {
				return true, err
			}
			continue
		}
		putSockBuf(b) // an idle session holds no buffer
		if err == errWouldBlock {
			break
		}
		return true, s.endOnReadError(err)
	}
	s.mu.Lock()
	switch {
	case s.aborting != nil:
		s.mu.Unlock()
		return true, s.endAborted()
	case s.busy == 0 && !time.Now().Before(s.lastActive.Add(s.cfg.IdleTimeout)):
		s.mu.Unlock()
		return true, s.endIdle()
	case s.busy == 0:
		s.armIdleLocked()
	}
	s.parked.Store(true)
	s.mu.Unlock()
	// From here another reader may run: this one touches nothing more but
	// the watch, which it arms for whichever reader comes next.
	if err := s.watch.Arm(); err != nil {
		s.armFailed(err)
	}
	return false, nil
}

// armFailed ends a session whose socket cannot be watched any more: it
// would not hear its client. A session that is ending already (another
// reader stopped the watch after this one parked) needs nothing.
func (s *session) armFailed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopping || s.aborting != nil:
	case errors.Is(err, netpoll.ErrClosed):
		s.abortLocked(disconnectShutdown, s.shuttingDownFrame()) // the server is stopping
	default:
		s.log.Error("websocket session: cannot watch the socket", "err", err)
		s.abortLocked(disconnectInternal, s.errorFrame(control.EInternal, "internal error", true))
	}
}

// readNow reads what the socket has without waiting: errWouldBlock when it
// has nothing, io.EOF once the client has shut its side.
func (s *session) readNow(b []byte) (n int, err error) {
	cerr := s.rc.Read(func(fd uintptr) bool {
		for {
			n, err = syscall.Read(int(fd), b)
			if err != syscall.EINTR {
				return true // never wait in Go's poller: that is the goroutine saved
			}
		}
	})
	switch {
	case cerr != nil:
		return 0, cerr
	case err == syscall.EAGAIN:
		return 0, errWouldBlock
	case err != nil:
		return 0, err
	case n <= 0:
		return 0, io.EOF
	}
	return n, nil
}

// pollDeadlineLocked is setDeadlineLocked for a polled session: wake the
// reader for an abort, no idle deadline while synthesis runs, otherwise
// the idle timer armed.
func (s *session) pollDeadlineLocked() {
	switch {
	case s.aborting != nil:
		s.wakeLocked()
	case s.busy > 0:
		if s.idleSet {
			s.idleTimer.Stop()
			s.idleSet = false
		}
	default:
		s.armIdleLocked()
	}
}

// armIdleLocked arms the idle timer for IdleTimeout after the last
// activity, unless it is armed already: activity only moves the deadline
// later, and onIdle re-arms a timer that fires early, so a message costs
// no timer reset.
func (s *session) armIdleLocked() {
	if !s.idleSet && !s.stopping {
		s.idleSet = true
		s.idleTimer.Reset(time.Until(s.lastActive.Add(s.cfg.IdleTimeout)))
	}
}

// onIdle runs on the timer's goroutine.
func (s *session) onIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idleSet = false
	switch {
	case s.stopping || s.busy > 0 || s.aborting != nil:
		// Ending already, or not idle: busy going back to 0 re-arms it.
	case time.Now().Before(s.lastActive.Add(s.cfg.IdleTimeout)):
		s.armIdleLocked() // there was activity since it was armed
	default:
		s.wakeLocked() // the reader ends the session (serve)
	}
}

// stopPolling ends the watch and the idle timer of a session that is
// ending; the reader that calls it is its last.
func (s *session) stopPolling() {
	if s.poller == nil {
		return
	}
	s.watch.Stop()
	s.idleTimer.Stop()
}
