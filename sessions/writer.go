package sessions

import (
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
)

// errGone stops a synthesis whose task was cancelled or whose session is
// ending: its audio has nowhere to go.
var errGone = errors.New("sessions: context gone")

// outq is the outbound queue of a session, guarded by session.mu. One
// writer goroutine drains it; it exists only while there is something to
// send or a context is rendering (so a stream does not start a goroutine
// per chunk), and an idle session holds neither the goroutine nor the
// slices.
//
// Two lanes: prio carries the read loop's replies (task_started, errors,
// task_cancelled), so a cancel is answered without waiting behind queued
// audio; main carries what the runners produce, in order. Every queue item
// is a whole frame or a whole audio_chunk + binary pair, so nothing can get
// between the two frames of a pair.
type outq struct {
	prio, main   []*frame
	prioH, mainH int // heads: items before them were taken
	bytes        int // queued audio and sentence frames, against MaxQueued
	writing      bool
	waiting      bool      // the writer is parked on work
	work         sync.Cond // signalled when a frame is queued or rendering ends
	broken       bool      // a write failed: drop everything
	space        sync.Cond // signalled when bytes shrink or a task goes
	idle         sync.Cond // signalled when the writer exits
}

func (q *outq) init(l sync.Locker) {
	q.space.L = l
	q.idle.L = l
	q.work.L = l
}

// pushLocked queues f without waiting for space: replies and terminal
// frames are small and bounded by what the client sends.
func (s *session) pushLocked(f *frame, prio bool) {
	if s.stopping || s.broken {
		putFrame(f)
		return
	}
	if prio {
		s.prio = append(s.prio, f)
	} else {
		s.main = append(s.main, f)
		s.bytes += f.size()
	}
	if s.waiting {
		s.work.Signal()
	} else if !s.writing {
		s.writing = true
		s.wg.Add(1)
		go s.writeLoop()
	}
}

// pushAudio queues a frame of task t, blocking while the queue is full:
// that is the backpressure that pauses t's synthesis for a slow client.
func (s *session) pushAudio(t *task, f *frame) error {
	s.mu.Lock()
	for s.bytes >= s.cfg.MaxQueued && !t.gone && !s.stopping && !s.broken {
		s.space.Wait()
	}
	if t.gone || s.stopping || s.broken {
		s.mu.Unlock()
		putFrame(f)
		return errGone
	}
	idle := !s.writing || s.waiting
	s.pushLocked(f, false)
	s.mu.Unlock()
	if idle {
		// The writer was just started on this P's run-next slot; without
		// a yield a fast engine renders its whole sentence before the
		// first chunk leaves, which is the latency that matters.
		runtime.Gosched()
	}
	return nil
}

// popLocked takes the next frame to write, dropping frames of tasks that
// are gone. Deciding under the lock matters: once popped, a frame will be
// written, so task_cancelled can count exactly what the client got.
func (s *session) popLocked() *frame {
	for s.prioH < len(s.prio) {
		f := s.prio[s.prioH]
		s.prio[s.prioH] = nil
		s.prioH++
		return f
	}
	for s.mainH < len(s.main) {
		f := s.main[s.mainH]
		s.main[s.mainH] = nil
		s.mainH++
		s.bytes -= f.size()
		s.space.Broadcast()
		if f.task != nil && f.task.gone {
			putFrame(f)
			continue
		}
		return f
	}
	return nil
}

// purgeLocked drops t's queued frames and returns how many sentence_done
// frames were among them (sentences the client will now not see done).
func (s *session) purgeLocked(t *task) (doneDropped int) {
	kept := s.main[:s.mainH]
	for _, f := range s.main[s.mainH:] {
		if f.task != t {
			kept = append(kept, f)
			continue
		}
		if f.kind == kindSentenceDone {
			doneDropped++
		}
		s.bytes -= f.size()
		putFrame(f)
	}
	clear(s.main[len(kept):])
	s.main = kept
	s.space.Broadcast()
	return doneDropped
}

// writeLoop is the only code that writes data frames to the socket.
func (s *session) writeLoop() {
	defer s.wg.Done()
	s.mu.Lock()
	for {
		f := s.popLocked()
		if f == nil {
			if s.busy > 0 && !s.stopping && !s.broken {
				s.waiting = true
				s.work.Wait()
				s.waiting = false
				continue
			}
			break
		}
		s.mu.Unlock()
		err := s.writeFrame(f)
		putFrame(f)
		s.mu.Lock()
		if err != nil && !s.broken {
			s.brokenLocked()
		}
	}
	// Give the slices back: an idle session keeps no queue.
	s.prio, s.main, s.prioH, s.mainH = nil, nil, 0, 0
	s.writing = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

// brokenLocked: the client cannot be written to any more. Everything queued
// is dropped, blocked producers are released, the read loop is woken.
func (s *session) brokenLocked() {
	s.broken = true
	for _, q := range [][]*frame{s.prio[s.prioH:], s.main[s.mainH:]} {
		for i, f := range q {
			putFrame(f)
			q[i] = nil
		}
	}
	s.prioH, s.mainH, s.bytes = len(s.prio), len(s.main), 0
	s.space.Broadcast()
	if s.abortCode == 0 {
		s.abortCode = -1
		s.setDeadlineLocked()
	}
}

func (s *session) writeFrame(f *frame) error {
	if err := s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
		return err
	}
	if err := s.conn.WriteMessage(websocket.TextMessage, f.hdr); err != nil {
		return err
	}
	if f.pair {
		return s.conn.WriteMessage(websocket.BinaryMessage, f.bin)
	}
	return nil
}

// waitWriter returns once the writer has sent (or dropped) everything
// queued and exited.
func (s *session) waitWriter() {
	s.mu.Lock()
	s.wakeWriterLocked()
	for s.writing {
		s.idle.Wait()
	}
	s.mu.Unlock()
}

// wakeWriterLocked lets a parked writer recheck whether it should exit.
func (s *session) wakeWriterLocked() {
	if s.waiting {
		s.work.Signal()
	}
}
