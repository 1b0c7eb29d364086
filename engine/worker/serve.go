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
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return writeFrame(s.w, typ, id, payload...)
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
		err = s.e.Synthesize(ctx, req, func(c engine.Chunk) error {
			return s.send(frameChunk, id, encodeChunk(c))
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
