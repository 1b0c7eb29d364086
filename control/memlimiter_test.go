package control

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock lets rate tests move time by hand instead of sleeping.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestLimiter() (*MemoryLimiter, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewMemoryLimiter()
	l.now, l.epoch = c.now, c.t
	return l, c
}

func TestLimiterRateBurstThenRefuse(t *testing.T) {
	ctx := context.Background()
	l, clk := newTestLimiter()
	for i, wantRemaining := range []int{1, 0} {
		d, err := l.AllowRequest(ctx, "ws", 2)
		if err != nil || !d.Allowed || d.Limit != 2 || d.Remaining != wantRemaining {
			t.Fatalf("request %d: %+v %v", i, d, err)
		}
	}
	clk.advance(300 * time.Millisecond)
	d, err := l.AllowRequest(ctx, "ws", 2)
	if d.Allowed || !IsCode(err, ERateLimited) {
		t.Fatalf("third request: %+v %v", d, err)
	}
	if e := AsError(err); e.RetryAfter != 1 || e.Code != ERateLimited {
		t.Fatalf("refusal: %+v", e)
	}
	if d.ResetAfter < 0.69 || d.ResetAfter > 0.71 {
		t.Fatalf("ResetAfter = %v, want 0.7", d.ResetAfter)
	}
	// Another workspace has its own budget.
	if d, _ := l.AllowRequest(ctx, "other", 2); !d.Allowed {
		t.Fatal("other workspace refused")
	}
	clk.advance(700 * time.Millisecond)
	if d, err := l.AllowRequest(ctx, "ws", 2); !d.Allowed {
		t.Fatalf("after a second: %+v %v", d, err)
	}
}

// TestLimiterRateSlidingWindow checks the window rule: whatever the spacing,
// no one-second window holds more than rps admissions.
func TestLimiterRateSlidingWindow(t *testing.T) {
	ctx := context.Background()
	for _, rps := range []int{1, 2, 5} {
		l, clk := newTestLimiter()
		var admitted []time.Time
		for i := 0; i < 400; i++ { // 10 s in 25 ms steps
			if d, _ := l.AllowRequest(ctx, "ws", rps); d.Allowed {
				admitted = append(admitted, clk.t)
			}
			clk.advance(25 * time.Millisecond)
		}
		for i := rps; i < len(admitted); i++ {
			if admitted[i].Sub(admitted[i-rps]) < time.Second {
				t.Fatalf("rps %d: %d admissions within one second ending %v", rps, rps+1, admitted[i])
			}
		}
		if len(admitted) < 10*rps {
			t.Fatalf("rps %d: only %d admitted in 10 s", rps, len(admitted))
		}
	}
}

func TestLimiterRateNoLimitAndPlanChange(t *testing.T) {
	ctx := context.Background()
	l, _ := newTestLimiter()
	for i := 0; i < 100; i++ {
		if d, err := l.AllowRequest(ctx, "ws", 0); !d.Allowed || err != nil || d.Limit != 0 {
			t.Fatalf("no limit: %+v %v", d, err)
		}
	}
	l.AllowRequest(ctx, "ws", 1)
	if d, _ := l.AllowRequest(ctx, "ws", 1); d.Allowed {
		t.Fatal("rps 1 admitted twice")
	}
	// An upgraded plan starts a fresh window rather than failing.
	if d, _ := l.AllowRequest(ctx, "ws", 3); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("after plan change: %+v", d)
	}
}

func TestLimiterSlots(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLimiter()
	a, free, err := l.Acquire(ctx, "ws", SlotStream, 2)
	if err != nil || free != 1 {
		t.Fatalf("first: free %d %v", free, err)
	}
	b, free, err := l.Acquire(ctx, "ws", SlotStream, 2)
	if err != nil || free != 0 {
		t.Fatalf("second: free %d %v", free, err)
	}
	for _, tc := range []struct{ kind, code string }{
		{SlotStream, EConcurrencyLimited}, {SlotSession, ETooManySessions},
	} {
		if tc.kind == SlotSession {
			for i := 0; i < 4; i++ {
				if _, _, err := l.Acquire(ctx, "ws", SlotSession, 4); err != nil {
					t.Fatal(err)
				}
			}
		}
		lease, _, err := l.Acquire(ctx, "ws", tc.kind, map[string]int{SlotStream: 2, SlotSession: 4}[tc.kind])
		e := AsError(err)
		if lease != nil || e.Code != tc.code || e.RetryAfter < 1 {
			t.Fatalf("%s full: %v %+v", tc.kind, lease, e)
		}
	}
	// Idempotent release: releasing a twice frees one slot, not two.
	a.Release()
	a.Release()
	if n := l.InUse("ws", SlotStream); n != 1 {
		t.Fatalf("in use after double release = %d", n)
	}
	c, free, err := l.Acquire(ctx, "ws", SlotStream, 2)
	if err != nil || free != 0 {
		t.Fatalf("reacquire: %d %v", free, err)
	}
	if _, _, err := l.Acquire(ctx, "ws", SlotStream, 2); err == nil {
		t.Fatal("a double release leaked a slot")
	}
	b.Release()
	c.Release()
	if n := l.InUse("ws", SlotStream); n != 0 {
		t.Fatalf("in use at end = %d", n)
	}
	if _, _, err := l.Acquire(ctx, "ws", SlotStream, 0); !IsCode(err, EConcurrencyLimited) {
		t.Fatalf("limit 0: %v", err)
	}
}

func TestLimiterSlotsConcurrent(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLimiter()
	const limit = 3
	var wg sync.WaitGroup
	var over atomic.Int32
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				lease, _, err := l.Acquire(ctx, "ws", SlotStream, limit)
				if err != nil {
					continue
				}
				if l.InUse("ws", SlotStream) > limit {
					over.Add(1)
				}
				lease.Release()
				lease.Release()
			}
		}()
	}
	wg.Wait()
	if over.Load() != 0 || l.InUse("ws", SlotStream) != 0 {
		t.Fatalf("over limit %d times, in use at end %d", over.Load(), l.InUse("ws", SlotStream))
	}
}

// BenchmarkLimiterRequest is the in-process limit cost of one synthesis
// request: a rate check, a slot, its release.
func BenchmarkLimiterRequest(b *testing.B) {
	ctx := context.Background()
	l := NewMemoryLimiter()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.AllowRequest(ctx, "ws", 0); err != nil {
			b.Fatal(err)
		}
		lease, _, err := l.Acquire(ctx, "ws", SlotStream, 10)
		if err != nil {
			b.Fatal(err)
		}
		lease.Release()
	}
}

func BenchmarkLimiterRate(b *testing.B) {
	ctx := context.Background()
	l, clk := newTestLimiter()
	b.ReportAllocs()
	for b.Loop() {
		// Time moves a second per call: always the admitted path.
		if d, _ := l.AllowRequest(ctx, "ws", 2); !d.Allowed {
			b.Fatal("refused")
		}
		clk.advance(time.Second)
	}
}
