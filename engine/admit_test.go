package engine_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// gateWorker holds the sentence whose text is gated until open closes, so
// that a test decides when the pool's only worker is free, and records the
// order in which sentences start.
type gateWorker struct {
	engine.Worker
	gated string
	open  chan struct{}
	mu    sync.Mutex
	order []string
}

func (w *gateWorker) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	w.mu.Lock()
	w.order = append(w.order, req.Text)
	w.mu.Unlock()
	if req.Text == w.gated {
		select {
		case <-w.open:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.Worker.Synthesize(ctx, req, emit)
}

func (w *gateWorker) started() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.order...)
}

// gatedPool is a pool of one worker that holds one sentence at a time;
// block makes that worker busy with the gated sentence "Blocker." until the
// test opens the gate.
func gatedPool(t *testing.T, e engine.Engine, maxLag time.Duration) (*engine.Pool, *gateWorker) {
	t.Helper()
	w := &gateWorker{Worker: engine.InProcess(e), gated: "Blocker.", open: make(chan struct{})}
	p := newPool(t, engine.PoolOptions{Engine: e, Workers: 1, WorkerDepth: 1, MaxLag: maxLag,
		NewWorker: func(int) (engine.Worker, error) { return w, nil }})
	t.Cleanup(func() {
		select {
		case <-w.open:
		default:
			close(w.open)
		}
	})
	return p, w
}

// block occupies the pool's worker with the gated sentence; its result
// arrives on the channel.
func block(t *testing.T, p *engine.Pool) <-chan error {
	t.Helper()
	blocked := make(chan error, 1)
	go func() {
		_, err := collect(context.Background(), p, engine.Request{Text: "Blocker."})
		blocked <- err
	}()
	waitFor(t, func() bool { return p.Stats().Active == 1 })
	return blocked
}

// waitFor polls a state of the pool (never a duration: how long it takes
// is not what is tested).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPoolAdmission: once the work a pool admitted is more than MaxLag
// behind (here a new request waiting for the only worker), a new request
// and an admission check are refused at once with ErrOverCapacity and a
// Retry-After, while a continuation of a stream already taken is admitted;
// once the work is done the pool admits again. Without MaxLag nothing is
// refused for capacity.
func TestPoolAdmission(t *testing.T) {
	const maxLag = 20 * time.Millisecond
	tests := []struct {
		name    string
		maxLag  time.Duration
		req     *engine.Request // nil: Admit
		refused bool
	}{
		{"new request", maxLag, &engine.Request{Text: "A new one."}, true},
		{"admission check", maxLag, nil, true},
		{"continuation", maxLag, &engine.Request{Text: "More of a stream.", Continues: true, Due: time.Now()}, false},
		{"new request, no MaxLag", 0, &engine.Request{Text: "A new one."}, false},
		{"admission check, no MaxLag", 0, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, w := gatedPool(t, reference.New(), tc.maxLag)
			blocked := block(t, p)
			// Admitted before the pool fell behind, it now waits.
			waiting := make(chan error, 1)
			go func() {
				_, err := collect(context.Background(), p, engine.Request{Text: "Waiting."})
				waiting <- err
			}()
			waitFor(t, func() bool { return p.Stats().Queued == 1 })
			waitFor(t, func() bool { return p.Stats().Behind > maxLag })

			var err error
			result := make(chan error, 1)
			switch {
			case tc.req == nil:
				err = p.Admit()
			default:
				go func() {
					_, err := collect(context.Background(), p, *tc.req)
					result <- err
				}()
				// Refused: the answer comes while the worker is still
				// held. Admitted: the request joins the queue.
				waitFor(t, func() bool { return len(result) > 0 || p.Stats().Queued == 2 })
				if len(result) > 0 {
					err = <-result
				}
			}
			if tc.refused {
				var ra interface{ RetryAfterSeconds() int }
				if !errors.Is(err, engine.ErrOverCapacity) || !errors.Is(err, engine.ErrBusy) ||
					!errors.As(err, &ra) || ra.RetryAfterSeconds() < 1 {
					t.Fatalf("got %v, want ErrOverCapacity (an ErrBusy) with a Retry-After", err)
				}
			} else if err != nil {
				t.Fatalf("refused: %v", err)
			}
			// Refusing: what a new request would be told now.
			if s := p.Stats(); s.Refusing != (tc.maxLag > 0) || s.Rejected != 0 || s.Refused != map[bool]uint64{true: 1}[tc.refused] {
				t.Errorf("stats while behind: %+v", s)
			}

			close(w.open)
			for _, ch := range []<-chan error{blocked, waiting} {
				if err := <-ch; err != nil {
					t.Fatal(err)
				}
			}
			if tc.req != nil && !tc.refused {
				if err := <-result; err != nil {
					t.Fatalf("admitted request: %v", err)
				}
			}
			// The work done, the pool is back within MaxLag/2: it admits.
			if err := p.Admit(); err != nil {
				t.Errorf("Admit once idle: %v", err)
			}
			if s := p.Stats(); s.Refusing || s.Requests != 0 {
				t.Errorf("stats once idle: %+v", s)
			}
		})
	}
}

// TestPoolBurstRefused: with the cost of a sentence learned, a burst of new
// requests arriving at once is admitted only as far as it fits within
// MaxLag, not whole: the refusal is predicted from the work queued, before
// anyone is late. Each burst request is more than MaxLag of work (the
// engine is paced so that it is, on any machine: its last chunk is due no
// sooner than 0.1 of its 1.7 s of audio), so once one is queued the rest
// are refused; the admitted one completes.
func TestPoolBurstRefused(t *testing.T) {
	const (
		maxLag = 40 * time.Millisecond
		text   = "Burst request number seven is here."
		burst  = 12
	)
	p, w := gatedPool(t, reference.New(reference.Options{RTF: 0.1}), maxLag)
	// The pool learns the cost from its own renders.
	if _, err := collect(context.Background(), p, engine.Request{Text: text}); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.Capacity <= 0 {
		t.Fatalf("cost not learned from a sentence: %+v", s)
	}
	blocked := block(t, p)
	results := make(chan error, burst)
	for range burst {
		go func() {
			_, err := collect(context.Background(), p, engine.Request{Text: text})
			results <- err
		}()
	}
	// Every burst request is answered (refused) or queued (admitted).
	waitFor(t, func() bool { s := p.Stats(); return int(s.Refused)+s.Queued == burst })
	close(w.open)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	admitted, refused := 0, 0
	for range burst {
		switch err := <-results; {
		case err == nil:
			admitted++
		case errors.Is(err, engine.ErrOverCapacity):
			refused++
		default:
			t.Fatal(err)
		}
	}
	if admitted > 1 || refused < burst-1 {
		t.Errorf("%d admitted, %d refused of a burst of %d: want at most one admitted", admitted, refused, burst)
	}
}

// TestPoolContinuationOrder: with the only worker busy, what is queued is
// taken earliest deadline first. A new request is due as it arrives; a
// realtime context's next sentence (a continuation) dueSlack (250 ms)
// before it is asked for, or before its listener runs out if that is
// sooner. So a continuation goes before the new requests that came after
// it, however much audio its listener has in hand (a pool full of new
// requests cannot hold back a stream it took), a stream already behind
// goes before one that is not, and new requests go in arrival order. The
// rest of a long HTTP text is not due until its listener nearly runs out
// (TestPoolNewRequestFirst).
func TestPoolContinuationOrder(t *testing.T) {
	tests := []struct {
		name string
		reqs []engine.Request // submitted in this order, each queued before the next
		want []string         // start order after the blocker
	}{
		{"continuation running out first",
			[]engine.Request{{Text: "Continues.", Continues: true, Due: time.Now().Add(100 * time.Millisecond)}, {Text: "New."}},
			[]string{"Continues.", "New."}},
		{"continuation with audio in hand first",
			[]engine.Request{{Text: "Continues.", Continues: true, Due: time.Now().Add(time.Hour)}, {Text: "New."}},
			[]string{"Continues.", "New."}},
		{"continuation behind before one in hand",
			[]engine.Request{{Text: "In hand.", Continues: true, Due: time.Now().Add(time.Hour)},
				{Text: "Behind.", Continues: true, Due: time.Now().Add(-time.Second)}},
			[]string{"Behind.", "In hand."}},
		{"new requests in arrival order",
			[]engine.Request{{Text: "First."}, {Text: "Second."}, {Text: "Third."}},
			[]string{"First.", "Second.", "Third."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, w := gatedPool(t, reference.New(), 0)
			blocked := block(t, p)
			errs := make(chan error, len(tc.reqs))
			for i, r := range tc.reqs {
				go func() {
					_, err := collect(context.Background(), p, r)
					errs <- err
				}()
				waitFor(t, func() bool { return p.Stats().Queued == i+1 })
			}
			close(w.open)
			if err := <-blocked; err != nil {
				t.Fatal(err)
			}
			for range tc.reqs {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if got := w.started()[1:]; !reflect.DeepEqual(got, tc.want) {
				t.Errorf("started %q, want %q", got, tc.want)
			}
		})
	}
}
