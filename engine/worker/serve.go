package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"syscall"

	"voicesvc/engine"
)

// Serve is the child side: it reads requests from r, runs them on e and
// writes their chunks to w, until r ends (the parent closed the pipe or
// went away).
//
// Requests run one after another on one goroutine, in arrival order except
// that one whose listener is waiting goes before those whose listener has
// audio in hand (enqueue): the engine renders one sentence at a time anyway
// (espeak-ng), and the parent queues a few sentences in a worker (Depth).
// A goroutine per request cost a wake-up per sentence, and the runnable
// goroutine it left queued while the renderer sat in C kept the Go
// runtime's monitor thread polling every 20-40 us: together 4,000 sleeps
// and 9,000 context switches a second per worker, on the cores the other
// worker and the gateway need.
func Serve(r io.Reader, w io.Writer, e engine.Engine) error {
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	if p := pollable(w); p != nil {
		w = p
	}
	if p := pollable(r); p != nil {
		r = p
	}
	s := &server{e: e, w: bufio.NewWriterSize(w, 2*midFlush), cancels: map[uint64]context.CancelFunc{},
		more: make(chan struct{}, 1)}
	rendered := make(chan struct{})
	go func() {
		defer close(rendered)
		s.render()
	}()
	br := bufio.NewReaderSize(r, 64<<10)
	var err error
	for {
		var f frame
		if f, err = readFrame(br); err != nil {
			break
		}
		switch f.typ {
		case frameRequest:
			rctx, cancel := context.WithCancel(ctx)
			q := queued{ctx: rctx, id: f.id}
			if q.req, q.err = decodeRequest(f.payload); q.err != nil {
				q.err = errors.Join(engine.ErrInvalidInput, q.err)
			}
			s.mu.Lock()
			s.cancels[f.id] = cancel
			s.enqueue(q)
			s.mu.Unlock()
			s.signal()
		case frameCancel:
			s.mu.Lock()
			if cancel := s.cancels[f.id]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
		}
	}
	// Whatever is queued or running ends cancelled, each with its frame.
	cancelAll()
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-rendered
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// pollable returns f's file descriptor reopened in non-blocking mode, read
// and written as a rawPipe, so that reads and writes wait in the Go
// runtime's poller instead of holding a thread and its P in a blocking
// system call. The runtime's monitor takes such a P back after 20 us, and
// every time it does it keeps polling at that rate for another millisecond
// or more: with a request arriving every few milliseconds it never rested
// (thousands of wake-ups a second, each taking a core from the renderer).
// For anything but an *os.File, or a descriptor that cannot be switched,
// it returns nil.
func pollable(f any) io.ReadWriter {
	file, ok := f.(*os.File)
	if !ok {
		return nil
	}
	fd := int(file.Fd()) // Fd puts the descriptor in blocking mode
	if err := syscall.SetNonblock(fd, true); err != nil {
		return nil
	}
	// NewFile sees the descriptor is non-blocking and registers it with
	// the poller. The original stays referenced: its finalizer would close
	// the descriptor under the new file.
	keep = append(keep, file)
	return rawOrFile(os.NewFile(uintptr(fd), file.Name()))
}

var keep []*os.File

type server struct {
	e   engine.Engine
	wmu sync.Mutex // one frame at a time on w
	w   *bufio.Writer

	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc
	queue   []queued
	closed  bool          // no more requests will come
	more    chan struct{} // a request was queued, or closed was set
}

// queued is a request waiting for the renderer.
type queued struct {
	ctx context.Context
	id  uint64
	req engine.Request
	err error // the request could not be decoded
}

// enqueue puts q in line: behind the others, unless its listener is
// waiting (not InHand) and theirs have audio in hand, in which case it
// goes before those. The parent keeps a few sentences queued here so the
// renderer never waits for it; this keeps them from delaying a new
// request's first audio. s.mu is held.
func (s *server) enqueue(q queued) {
	i := len(s.queue)
	if !q.req.InHand {
		for i > 0 && s.queue[i-1].req.InHand {
			i--
		}
	}
	s.queue = slices.Insert(s.queue, i, q)
}

// signal tells the renderer there is something to look at; it never
// blocks, and a renderer busy in the engine finds the signal when done.
func (s *server) signal() {
	select {
	case s.more <- struct{}{}:
	default:
	}
}

// render runs queued requests until the queue is empty and closed.
func (s *server) render() {
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return
			}
			<-s.more
			continue
		}
		q := s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		s.run(q)
		// A new scheduling tick: a goroutine that keeps its P for 10 ms
		// (back-to-back sentences, all in C) has the P taken from its cgo
		// call by the runtime's monitor, which then polls at 20 us again.
		runtime.Gosched()
	}
}

func (s *server) send(typ byte, id uint64, payload ...[]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := writeFrame(s.w, typ, id, payload...); err != nil {
		return err
	}
	return s.w.Flush()
}

// chunk buffers a chunk frame and flushes it when flush is set. Other
// chunks wait in the buffer for the next frame that is flushed (the
// request's done or error frame, the next sentence's first chunk), or for
// midFlush bytes: the parent then reads several in one go, a read and a
// wake-up instead of one per chunk. The samples are in the buffer when it
// returns, so they go back for the engine's next chunk
// (engine.SampleBuffer).
func (s *server) chunk(id uint64, c engine.Chunk, flush bool) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	err := writeChunk(s.w, id, c)
	engine.RecycleSamples(c.Samples)
	if err != nil || (!flush && s.w.Buffered() < midFlush) {
		return err
	}
	return s.w.Flush()
}

// midFlush is how much of a sentence's middle may wait in the buffer:
// 256 KiB is about 3 s of audio at 22050 Hz, which espeak-ng renders in
// about 3 ms, well inside the 20 ms the sentence's first chunk gave the
// listener. Below it a typical sentence (2-3 s) crosses the pipe in two
// writes, its first chunk and the rest; each write is a wake-up of the
// parent, whose CPU time the workers wait for (a 64 KiB flush point cost it
// 20% more per second of audio).
const midFlush = 256 << 10

func (s *server) run(q queued) {
	defer func() {
		s.mu.Lock()
		s.cancels[q.id]()
		delete(s.cancels, q.id)
		s.mu.Unlock()
	}()
	err := q.err
	if err == nil {
		req := q.req
		// A sentence's first chunk goes out at once unless its listener
		// has audio in hand. The rest goes with the done frame, in one
		// write: a request is one sentence when the pool sends it.
		first := !req.InHand // the next chunk starts a sentence
		err = s.e.Synthesize(q.ctx, req, func(c engine.Chunk) error {
			flush := first
			first = c.Last && !req.InHand
			return s.chunk(q.id, c, flush)
		})
	}
	if err != nil {
		s.send(frameError, q.id, []byte{errorKind(err)}, []byte(err.Error()))
		return
	}
	s.send(frameDone, q.id)
}
