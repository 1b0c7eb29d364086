package sessions

import (
	"encoding/binary"
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
// Two lanes: prio carries the reader's replies (task_started, errors,
// task_cancelled, pongs), so a cancel is answered without waiting behind
// queued audio; main carries what the runners produce, in order. Every
// queue item is a whole frame or a whole audio_chunk + binary pair, so
// nothing can get between the two frames of a pair.
//
// Both lanes are bounded in bytes, each frame counted with its overhead
// (frameCost), so that what a session holds does not depend on what the
// client sends. The main lane by backpressure: a runner waits while it
// holds MaxQueued (pushAudio), and what else it queues (sentence_done,
// task_done, task_failed) comes one to one with audio or with a context's
// task_started on the prio lane (a context with nothing to speak ends at
// once, so the client drives those through the cap). The prio lane by
// backpressure on the reader: a reply that would take it past MaxReplies
// waits, and with it the reading of the client's messages, until the
// writer has taken enough (waitRepliesLocked). A client that sends in
// bursts while it reads is only slowed to the pace of its own reading.
// Only a client whose socket takes nothing for replyStall while its
// replies are at the bound is taken for one that does not read, and the
// session is closed with 1008 (overflowLocked). Without the bound a client
// that pings and never reads grew a session by 310 MB per million pings;
// with it closing at once, a client that reads all the time but sent 300
// task_start/task_cancel pairs in one burst was closed as well.
type outq struct {
	prio, main   []*frame
	prioH, mainH int // heads: items before them were taken
	bytes        int // cost of the main lane, against MaxQueued
	prioBytes    int // cost of the prio lane, against MaxReplies
	writing      bool
	waiting      bool      // the writer is parked on work
	work         sync.Cond // signalled when a frame is queued or rendering ends
	broken       bool      // a write failed: drop everything
	space        sync.Cond // signalled when bytes shrink or a task goes
	idle         sync.Cond // signalled when the writer exits

	// progressAt is when the writer last made progress: started a
	// write, finished one, or was started; inWrite: it is in a write.
	progressAt time.Time
	inWrite    bool
	replyWait  bool // the reader waits for room on the prio lane (replies.go)
}

func (q *outq) init(l sync.Locker) {
	q.space.L = l
	q.idle.L = l
	q.work.L = l
}

// pushLocked queues f without waiting for space. A reply that does not
// fit the prio lane's cap is dropped and closes the session (1008).
func (s *session) pushLocked(f *frame, prio bool) {
	if s.stopping || s.broken || s.overflowed {
		putFrame(f)
		return
	}
	f.cost = frameCost(f)
	if prio {
		if s.prioBytes > 0 && s.prioBytes+f.cost > s.cfg.MaxReplies && !s.waitRepliesLocked(f.cost) {
			putFrame(f)
			return
		}
		s.prio = append(s.prio, f)
		s.prioBytes += f.cost
	} else {
		s.main = append(s.main, f)
		s.bytes += f.cost
	}
	if s.waiting {
		s.work.Signal()
	} else if !s.writing {
		s.writing = true
		s.progressAt = time.Now()
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
		s.prioBytes -= f.cost
		if s.replyWait {
			s.space.Broadcast()
		}
		return f
	}
	for s.mainH < len(s.main) {
		f := s.main[s.mainH]
		s.main[s.mainH] = nil
		s.mainH++
		s.bytes -= f.cost
		s.space.Broadcast()
		if f.task != nil && f.task.gone {
			putFrame(f)
			continue
		}
		if f.kind == kindTaskDone {
			// Once taken it will be written: the context is over for
			// the client, a cancel after this is refused.
			s.undrainLocked(f.task)
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
		s.bytes -= f.cost
		putFrame(f)
	}
	clear(s.main[len(kept):])
	s.main = kept
	s.space.Broadcast()
	return doneDropped
}

// Batch bounds: the writer takes every frame queued, up to these, and
// sends them with one write so that a stream costs one syscall per batch
// instead of two per chunk; the caps keep one socket from hogging a thread
// and bound the memory a batch pins.
const (
	maxBatchFrames = 64
	maxBatchBytes  = 16 << 10
)

// writeLoop is the only code that writes to the socket while the session
// runs (data frames and pongs; see writeBatch). Close frames are written by
// finish only after it has stopped this loop for good.
func (s *session) writeLoop() {
	defer s.wg.Done()
	var batch [maxBatchFrames]*frame
	s.mu.Lock()
	for {
		// One critical section decides the whole batch, in pop order:
		// a cancel either drops a frame here or queues task_cancelled for
		// a later batch, never between.
		n, size := 0, 0
		for n < len(batch) && size < maxBatchBytes {
			f := s.popLocked()
			if f == nil {
				break
			}
			batch[n] = f
			n++
			size += f.wireSize()
			if f.kind == kindAudio {
				f.task.sentS += f.dur // handed to the socket: the cancel receipt counts it
			}
		}
		if n == 0 {
			if s.busy > 0 && !s.stopping && !s.broken {
				s.waiting = true
				s.work.Wait()
				s.waiting = false
				continue
			}
			break
		}
		s.progressAt, s.inWrite = time.Now(), true
		s.mu.Unlock()
		err := s.writeBatch(batch[:n], size)
		for i, f := range batch[:n] {
			putFrame(f)
			batch[i] = nil
		}
		s.mu.Lock()
		s.progressAt, s.inWrite = time.Now(), false
		if err != nil && !s.broken {
			s.brokenLocked()
		}
	}
	// Give the slices back: an idle session keeps no queue. (Only a
	// broken or stopping session can leave task_done frames unsent.)
	s.prio, s.main, s.prioH, s.mainH, s.bytes, s.prioBytes = nil, nil, 0, 0, 0, 0
	s.draining = nil
	s.writing = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

// brokenLocked: the client cannot be written to any more. Everything queued
// is dropped, blocked producers are released, the reader is woken.
func (s *session) brokenLocked() {
	s.broken = true
	for _, q := range [][]*frame{s.prio[s.prioH:], s.main[s.mainH:]} {
		for i, f := range q {
			putFrame(f)
			q[i] = nil
		}
	}
	s.prioH, s.mainH, s.bytes, s.prioBytes = len(s.prio), len(s.main), 0, 0
	s.space.Broadcast()
	if s.aborting == nil {
		s.aborting = disconnectBroken
		s.setDeadlineLocked()
	}
}

// overflowLocked: the client keeps sending but does not read what it is
// answered. The session ends with 1008: the reader stops reading (so the
// client can send no more), the queued replies are dropped (nobody reads
// them) and the close frame follows the batch being written, if the client
// reads again within the write timeout.
func (s *session) overflowLocked() {
	s.overflowed = true
	for i, f := range s.prio[s.prioH:] {
		putFrame(f)
		s.prio[s.prioH+i] = nil
	}
	s.prioH, s.prioBytes = len(s.prio), 0
	s.abortLocked(disconnectNotReading, nil)
}

// frameOverhead is what a queued frame costs beyond its bytes: the pooled
// frame, its slice headers and its queue slot (about 100 bytes), rounded
// up. Counting it bounds a flood of empty pings too.
const frameOverhead = 128

func frameCost(f *frame) int { return len(f.hdr) + len(f.bin) + frameOverhead }

// writeBuf is the encoding buffer of one batch. It is pooled and held only
// while a batch is written, so an idle session holds none.
type writeBuf struct{ b []byte }

var writeBufs = sync.Pool{New: func() any { return &writeBuf{b: make([]byte, 0, maxBatchBytes+4<<10)} }}

// writeBatch encodes the frames as WebSocket frames (RFC 6455 5.2: server
// frames are unmasked, FIN set, never fragmented, never compressed) and
// sends them with one Write on the socket.
//
// This bypasses the websocket.Conn writer, which is safe because nothing
// else writes to the socket while the writer can run: the session decodes
// the client's frames itself (inbound.go), so the library never reads and
// never answers anything on its own; pongs come through this queue
// (onPing), and every close frame (the echo of a client's, a 1002 for a
// protocol error, a 1009) is written by finish after waitWriter with
// stopping set (no writer can start again).
func (s *session) writeBatch(fs []*frame, size int) error {
	nc := s.nc
	if nc == nil {
		return websocket.ErrNilNetConn
	}
	wb := writeBufs.Get().(*writeBuf)
	b := wb.b[:0]
	if cap(b) < size {
		b = make([]byte, 0, size)
	}
	for _, f := range fs {
		if f.kind == kindPong {
			b = appendWSFrame(b, websocket.PongMessage, f.hdr)
			continue
		}
		// An event the protocol has no message for is an empty frame,
		// kept in the queue for its order and bookkeeping (sentence_done
		// counts, task_done's drain) and not written; an audio pair whose
		// protocol sends binary audio alone has no text frame.
		if len(f.hdr) > 0 {
			b = appendWSFrame(b, websocket.TextMessage, f.hdr)
		}
		if f.pair {
			b = appendWSFrame(b, websocket.BinaryMessage, f.bin)
		}
	}
	var err error
	if len(b) > 0 { // (a batch of events with no message writes nothing)
		err = nc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		if err == nil {
			_, err = nc.Write(b)
		}
	}
	if cap(b) <= 2*maxBatchBytes {
		wb.b = b[:0]
		writeBufs.Put(wb)
	}
	return err
}

// appendWSFrame appends one unmasked final frame of opcode op.
func appendWSFrame(b []byte, op int, p []byte) []byte {
	b = append(b, 0x80|byte(op))
	switch n := len(p); {
	case n <= 125:
		b = append(b, byte(n))
	case n <= 0xffff:
		b = append(b, 126, byte(n>>8), byte(n))
	default:
		b = append(b, 127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	return append(b, p...)
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
