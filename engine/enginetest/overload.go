// Package enginetest holds what the tests of the engine's users share: a
// real pool that can be put behind schedule on demand, for the refusals of
// graceful overload (engine.Admitter) seen from every transport.
package enginetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// Overloaded is a real pool (one worker, the reference engine) with
// graceful overload on: MaxLag behind schedule, it refuses new requests.
// Its worker holds the sentence "Blocker." until Open.
type Overloaded struct {
	Pool   *engine.Pool
	MaxLag time.Duration

	t    testing.TB
	gate chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// NewOverloaded starts the pool; the test's cleanup opens the worker, waits
// for the requests FallBehind made (each must succeed) and closes it.
func NewOverloaded(t testing.TB, maxLag time.Duration) *Overloaded {
	t.Helper()
	ref := reference.New()
	o := &Overloaded{MaxLag: maxLag, t: t, gate: make(chan struct{})}
	p, err := engine.NewPool(engine.PoolOptions{Engine: ref, Workers: 1, WorkerDepth: 1, MaxLag: maxLag,
		RecycleSamples: true,
		NewWorker:      func(int) (engine.Worker, error) { return heldWorker{engine.InProcess(ref), o.gate}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	o.Pool = p
	t.Cleanup(func() {
		o.Open()
		o.wg.Wait()
		p.Close()
	})
	return o
}

// FallBehind puts the pool more than MaxLag behind: its only worker holds
// one request and another waits for it. It returns once the pool says so.
func (o *Overloaded) FallBehind() {
	o.t.Helper()
	o.submit("Blocker.")
	o.Wait(func(s engine.PoolStats) bool { return s.Active == 1 })
	o.submit("Waiting.")
	o.Wait(func(s engine.PoolStats) bool { return s.Queued == 1 })
	o.Wait(func(s engine.PoolStats) bool { return s.Behind > o.MaxLag })
}

// Open lets the held work through.
func (o *Overloaded) Open() { o.once.Do(func() { close(o.gate) }) }

func (o *Overloaded) submit(text string) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		err := o.Pool.Synthesize(context.Background(), engine.Request{Text: text}, func(engine.Chunk) error { return nil })
		if err != nil {
			o.t.Errorf("%s: %v", text, err)
		}
	}()
}

// Wait polls the pool's state until cond holds: never a duration, how long
// it takes is not what is tested.
func (o *Overloaded) Wait(cond func(engine.PoolStats) bool) {
	o.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(o.Pool.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			o.t.Fatalf("pool state not reached: %+v", o.Pool.Stats())
		}
	}
}

// heldWorker holds the sentence "Blocker." until open closes.
type heldWorker struct {
	engine.Worker
	open chan struct{}
}

func (w heldWorker) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	if req.Text == "Blocker." {
		select {
		case <-w.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.Worker.Synthesize(ctx, req, emit)
}
