package engine

import (
	"context"
	"sync"
)

// RendersAhead is implemented by engines for which rendering the next
// sentence while the current one plays pays: an upstream engine, where
// each sentence is a request whose round trip would otherwise be a gap
// between sentences. The built-in engines schedule sentences themselves
// (the pool), so they do not.
type RendersAhead interface {
	RendersAhead() bool
}

// WantsAhead reports whether e renders ahead.
func WantsAhead(e Engine) bool {
	ra, ok := e.(RendersAhead)
	return ok && ra.RendersAhead()
}

// Ahead is one request rendering ahead of its turn into a bounded queue of
// chunks: beyond maxChunks the engine's emit waits (an upstream's stream
// then waits in the socket buffers). Synthesize later hands its chunks on;
// Cancel abandons it.
type Ahead struct {
	Engine // Name, NativeRate, ... of the engine it runs on
	req    Request
	chunks chan Chunk
	cancel context.CancelFunc
	done   chan struct{}
	err    error // set before done closes
	once   sync.Once
}

// RenderAhead starts req on e now. ctx bounds it; Cancel stops it sooner.
func RenderAhead(ctx context.Context, e Engine, req Request, maxChunks int) *Ahead {
	ctx, cancel := context.WithCancel(ctx)
	a := &Ahead{Engine: e, req: req, chunks: make(chan Chunk, max(1, maxChunks)), cancel: cancel,
		done: make(chan struct{})}
	go func() {
		defer close(a.done)
		defer close(a.chunks)
		a.err = e.Synthesize(ctx, req, func(c Chunk) error {
			select {
			case a.chunks <- c:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return a
}

// Request is what is rendering.
func (a *Ahead) Request() Request { return a.req }

// Synthesize emits the request's chunks (the req argument is ignored: it
// is the one given to RenderAhead) and returns its outcome. It may run
// once. ctx ending or emit failing abandons the rest.
func (a *Ahead) Synthesize(ctx context.Context, _ Request, emit func(Chunk) error) error {
	for {
		select {
		case c, ok := <-a.chunks:
			if !ok {
				<-a.done
				return a.err
			}
			if err := emit(c); err != nil {
				a.Cancel()
				return err
			}
		case <-ctx.Done():
			a.Cancel()
			return ctx.Err()
		}
	}
}

// Cancel stops the request and waits for it, giving back the samples of
// the chunks it queued.
func (a *Ahead) Cancel() {
	a.once.Do(func() {
		a.cancel()
		for c := range a.chunks {
			RecycleSamples(c.Samples)
		}
		<-a.done
	})
}
