package sessions

import (
	"context"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// gateWorker is the pool's only worker; it holds the sentence "Blocker."
// until open closes.
type gateWorker struct {
	engine.Worker
	open chan struct{}
}

func (w gateWorker) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	if req.Text == "Blocker." {
		select {
		case <-w.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.Worker.Synthesize(ctx, req, emit)
}

// overloadedPool is a real pool (one worker, the reference engine) with
// graceful overload on, and a function that puts it behind by more than
// its MaxLag: its worker held, a new request waiting. open lets the work
// through; the requests' results are checked at cleanup.
func overloadedPool(t *testing.T) (p *engine.Pool, fallBehind func(), open func()) {
	t.Helper()
	const maxLag = 20 * time.Millisecond
	ref := reference.New()
	gate := make(chan struct{})
	p, err := engine.NewPool(engine.PoolOptions{Engine: ref, Workers: 1, WorkerDepth: 1, MaxLag: maxLag,
		NewWorker: func(int) (engine.Worker, error) { return gateWorker{engine.InProcess(ref), gate}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	open = func() { once.Do(func() { close(gate) }) }
	var wg sync.WaitGroup
	t.Cleanup(func() {
		open()
		wg.Wait()
		p.Close()
	})
	poll := func(cond func(engine.PoolStats) bool) { waitPool(t, p, cond) }
	submit := func(text string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Synthesize(context.Background(), engine.Request{Text: text}, func(engine.Chunk) error { return nil }); err != nil {
				t.Errorf("%s: %v", text, err)
			}
		}()
	}
	fallBehind = func() {
		submit("Blocker.")
		poll(func(s engine.PoolStats) bool { return s.Active == 1 })
		submit("Waiting.")
		poll(func(s engine.PoolStats) bool { return s.Queued == 1 })
		poll(func(s engine.PoolStats) bool { return s.Behind > maxLag })
	}
	return p, fallBehind, open
}

// waitPool polls the pool's state (never a duration: how long it takes is
// not what is tested).
func waitPool(t *testing.T, p *engine.Pool, cond func(engine.PoolStats) bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(p.Stats()); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pool state not reached: %+v", p.Stats())
		}
	}
}

// TestCapacityRefusal: while the engine is at capacity, a new context is
// refused at once with task_failed upstream_busy (no task_started, nothing
// billed, the context id free again), whether or not its task_start
// carries text; a context already open keeps being spoken: its next
// sentence is a continuation, which the engine never refuses.
func TestCapacityRefusal(t *testing.T) {
	const credits = 1000
	tests := []struct {
		name    string
		msg     map[string]any
		refused bool
		chars   int // billed by msg when it is taken
	}{
		{"task_start with text", start("b", "A new context. ", true), true, 0},
		{"task_start without text", start("b", "", false), true, 0},
		{"task_continue of an open context", cont("a", "Second sentence here.", true), false, len("Second sentence here.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meter, ws := billedWorkspace(t, "sqlite", credits)
			p, fallBehind, open := overloadedPool(t)
			deps := refDeps(p)
			deps.Meter, deps.Workspace = meter, ws
			ts := startServer(t, Config{}, deps)
			c := ts.dial(t)
			first := "First sentence here. "
			c.mustSend(t, start("a", first, false))
			c.until(t, isType("sentence_done", "a"))

			fallBehind()
			c.mustSend(t, tc.msg)
			if tc.refused {
				evs := c.until(t, func(ev event) bool { return ev.ContextID == "b" })
				f := evs[len(evs)-1]
				if f.Type != "task_failed" || f.Code != control.EUpstreamBusy || f.SentencesCompleted != 0 || f.TraceID == "" {
					t.Fatalf("first frame for the refused context: %+v, want task_failed upstream_busy", f)
				}
				if s := p.Stats(); s.Refused != 1 {
					t.Errorf("pool refused %d, want 1", s.Refused)
				}
				// Not opened: the same id opens once the engine has room.
				open()
				waitPool(t, p, func(s engine.PoolStats) bool { return s.Requests == 0 })
				c.mustSend(t, start("b", "Room now.", true))
				checkDone(t, c.collect(t, isType("task_done", "b"))["b"], "Room now.")
				tc.chars = len("Room now.")
			} else {
				// The continuation is queued behind the held worker, not
				// refused; once the worker is free it is spoken.
				waitPool(t, p, func(s engine.PoolStats) bool { return s.Queued == 2 })
				open()
				checkDone(t, c.collect(t, isType("task_done", "a"))["a"], "First sentence here.", "Second sentence here.")
				if s := p.Stats(); s.Refused != 0 {
					t.Errorf("pool refused %d, want 0", s.Refused)
				}
			}
			left, err := meter.Remaining(context.Background(), ws)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(credits - len(first) - tc.chars); left != want {
				t.Errorf("%d characters left, want %d: a refused context is not billed", left, want)
			}
		})
	}
}
