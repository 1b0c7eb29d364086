package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"

	"voicesvc/engine"
)

// Serve is the child side: it reads requests from r, runs them on e and
// writes their chunks to w, until r ends (the parent closed the pipe or
// went away). Requests run concurrently; e serializes where it must.
func Serve(r io.Reader, w io.Writer, e engine.Engine) error {
	ctx, cancelAll := context.WithCancel(context.Background())
	defer cancelAll()
	s := &server{e: e, w: bufio.NewWriterSize(w, 64<<10), cancels: map[uint64]context.CancelFunc{}}
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
			s.mu.Lock()
			s.cancels[f.id] = cancel
			s.mu.Unlock()
			s.wg.Add(1)
			go s.run(rctx, f.id, f.payload)
		case frameCancel:
			s.mu.Lock()
			if cancel := s.cancels[f.id]; cancel != nil {
				cancel()
			}
			s.mu.Unlock()
		}
	}
	cancelAll()
	s.wg.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type server struct {
	e       engine.Engine
	wmu     sync.Mutex // one frame at a time on w
	w       *bufio.Writer
	mu      sync.Mutex
	cancels map[uint64]context.CancelFunc
	wg      sync.WaitGroup
}

func (s *server) send(typ byte, id uint64, payload ...[]byte) error {
	return s.write(typ, id, true, payload...)
}

// write buffers a frame and flushes it when flush is set. A chunk in
// the middle of a sentence waits in the buffer for the sentence's last
// chunk (or a full buffer, or any other frame): the parent then reads
// several in one go, a read and a wake-up instead of one per chunk. The
// engine renders far ahead of real time, so the wait is a millisecond or
// two of rendering; a sentence's first chunk, which a listener may be
// waiting for, is flushed at once.
func (s *server) write(typ byte, id uint64, flush bool, payload ...[]byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := writeFrame(s.w, typ, id, payload...); err != nil {
		return err
	}
	if !flush {
		return nil
	}
	return s.w.Flush()
}

func (s *server) run(ctx context.Context, id uint64, payload []byte) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		s.cancels[id]()
		delete(s.cancels, id)
		s.mu.Unlock()
	}()
	req, err := decodeRequest(payload)
	if err == nil {
		first := true // the next chunk starts a sentence
		err = s.e.Synthesize(ctx, req, func(c engine.Chunk) error {
			flush := first || c.Last
			first = c.Last
			return s.write(frameChunk, id, flush, encodeChunk(c))
		})
	} else {
		err = errors.Join(engine.ErrInvalidInput, err)
	}
	if err != nil {
		s.send(frameError, id, []byte{errorKind(err)}, []byte(err.Error()))
		return
	}
	s.send(frameDone, id)
}
