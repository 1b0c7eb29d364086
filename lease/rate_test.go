package lease

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
)

// allow asks m for n requests of ws, returning how many were admitted; a
// refusal must be rate_limited with a Retry-After.
func allow(t *testing.T, m *Manager, ws string, rps, n int) int {
	t.Helper()
	ok := 0
	for i := 0; i < n; i++ {
		d, err := m.AllowRequest(bg, ws, rps)
		switch {
		case err == nil:
			if !d.Allowed || d.Limit != rps || d.Remaining < 0 {
				t.Fatalf("admitted with decision %+v", d)
			}
			ok++
		case control.IsCode(err, control.ERateLimited):
			var e *control.Error
			if !asError(err, &e) || e.RetryAfter < 1 || d.Allowed {
				t.Fatalf("refusal %+v %v", d, err)
			}
		default:
			t.Fatalf("allow: %v", err)
		}
	}
	return ok
}

func asError(err error, e **control.Error) bool {
	ce, ok := err.(*control.Error)
	*e = ce
	return ok
}

// TestRequestsBoundAcrossServers: three servers, each with more demand
// than the whole limit, over 3 seconds of a hand-moved clock: in every
// 1-second window the requests admitted across servers are at most the
// limit plus the shares the servers can hold (3 * rps/8), and the limit is
// actually reached (the shares do not starve the workspace).
func TestRequestsBoundAcrossServers(t *testing.T) {
	for _, rps := range []int{16, 100, 10_000} {
		f := newFakeStore(newClock())
		var ms []*Manager
		for i := 0; i < 3; i++ {
			ms = append(ms, newTestManager(f, Config{}))
		}

		var admitted []int64 // ms since start, one per admission
		const step = 5 * time.Millisecond
		perStep := max(rps/100, 2) // each server asks for 200*perStep per second
		for now := time.Duration(0); now < 3*time.Second; now += step {
			for _, m := range ms {
				n := allow(t, m, "w", rps, perStep)
				for i := 0; i < n; i++ {
					admitted = append(admitted, int64(now/time.Millisecond))
				}
			}
			f.clk.add(step)
		}
		bound := rps + 3*ms[0].shareCap(rps)
		best := 0
		for i := range admitted {
			j := i
			for j < len(admitted) && admitted[j] < admitted[i]+1000 {
				j++
			}
			best = max(best, j-i)
		}
		t.Logf("rps %d: most in one second %d (bound %d), %d admitted in 3 s, %d store calls", rps, best, bound, len(admitted), f.calls)
		if best > bound {
			t.Fatalf("rps %d: %d admitted in one second, bound %d", rps, best, bound)
		}
		if total := len(admitted); total < 2*rps {
			t.Fatalf("rps %d: only %d admitted in 3 s with demand beyond the limit", rps, total)
		}
		if calls, total := f.calls, len(admitted); rps >= 10_000 && float64(calls) > 0.05*float64(total) {
			t.Fatalf("rps %d: %d store calls for %d requests", rps, calls, total)
		}
	}
}

// TestSmallRPSExact: a limit below ExactBelow (Free: 2) is counted by the
// exact limiter, one call per request, never from a share: three servers
// sharing one exact limiter admit exactly the limit.
func TestSmallRPSExact(t *testing.T) {
	f := newFakeStore(newClock())
	exact := control.NewMemoryLimiter()
	var ms []*Manager
	for i := 0; i < 3; i++ {
		m := newTestManager(f, Config{})
		m.exact = exact
		ms = append(ms, m)
	}
	total := 0
	for _, m := range ms {
		total += allow(t, m, "free", 2, 5)
	}
	if total != 2 {
		t.Fatalf("%d admitted on rps 2 across 3 servers within a second", total)
	}
	if f.calls != 0 {
		t.Fatalf("%d lease calls for an exact limit", f.calls)
	}
}

// TestRequestShareExpires: a share is used only within RPSFor of its ask;
// its unused part goes back to the window with the next ask, so the window
// counts what was admitted.
func TestRequestShareExpires(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{RPSFor: 100 * time.Millisecond})
	// Grow the share: each one used up at once doubles the next.
	allow(t, m, "w", 800, 40)
	if m.Stats().Requests == 0 {
		t.Fatal("no share held after a burst")
	}
	calls := f.calls
	f.clk.add(100 * time.Millisecond) // the share's validity is over
	if m.Stats().Requests != 0 {
		t.Fatal("an expired share is still counted as held")
	}
	allow(t, m, "w", 800, 1)
	if f.calls != calls+1 {
		t.Fatalf("an expired share served without asking the store (%d calls)", f.calls-calls)
	}
	held := m.Stats().Requests
	window := 0
	for _, h := range f.window["w"] {
		window += h.n
	}
	if window != 41+held {
		t.Fatalf("window holds %d; want the 41 admitted plus the %d held", window, held)
	}
}

// TestRateAdminChange: a lowered limit (the next request brings it after
// the change feed's Invalidate) asks the store at once and the share is
// capped by the new limit; an Invalidate alone makes the next request ask.
func TestRateAdminChange(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{})
	allow(t, m, "w", 10_000, 200)
	calls := f.calls
	m.Invalidate("w")
	allow(t, m, "w", 10_000, 1)
	if f.calls != calls+1 {
		t.Fatal("a stale share served without asking the store")
	}
	allow(t, m, "w", 16, 1)
	if held := m.Stats().Requests; held > m.shareCap(16) {
		t.Fatalf("share %d after the limit went down to 16", held)
	}
}

// TestRateOutage: a share in hand serves during an outage, then
// store_unavailable; never more than the share.
func TestRateOutage(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{})
	allow(t, m, "w", 10_000, 100)
	held := m.Stats().Requests
	f.setDown(true)
	served := 0
	for i := 0; i < 10_000; i++ {
		if _, err := m.AllowRequest(bg, "w", 10_000); err != nil {
			if !control.StoreUnavailable(err) {
				t.Fatalf("refusal during the outage: %v", err)
			}
			break
		}
		served++
	}
	if served != held {
		t.Fatalf("served %d during the outage on a share of %d", served, held)
	}
}

// TestRateRefusalFromMemory: once the store says the window is full, the
// server refuses without asking again until the window admits one more,
// with RateLimit values from the store's view.
func TestRateRefusalFromMemory(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{})
	if got := allow(t, m, "w", 16, 100); got != 16 {
		t.Fatalf("admitted %d of 16 in a second", got)
	}
	calls := f.calls
	d, err := m.AllowRequest(bg, "w", 16)
	if !control.IsCode(err, control.ERateLimited) || d.ResetAfter <= 0 || d.ResetAfter > 1 || d.Remaining != 0 {
		t.Fatalf("decision %+v %v", d, err)
	}
	if f.calls != calls {
		t.Fatal("a full window asked the store again")
	}
	f.clk.add(time.Second)
	if got := allow(t, m, "w", 16, 1); got != 1 {
		t.Fatal("a second later the window admits nothing")
	}
}

// TestRequestsConcurrent: servers admitting from many goroutines at once,
// within one moment of the store's clock (the window never moves on),
// admit no more than the limit: every request comes from a grant, and the
// grants of one window sum to at most the limit.
func TestRequestsConcurrent(t *testing.T) {
	f := newFakeStore(newClock())
	var ms []*Manager
	for i := 0; i < 3; i++ {
		ms = append(ms, newTestManager(f, Config{}))
	}
	var wg sync.WaitGroup
	var total atomic.Int64
	for _, m := range ms {
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					_, err := m.AllowRequest(bg, "w", 1000)
					if err == nil {
						total.Add(1)
					} else if !control.IsCode(err, control.ERateLimited) {
						t.Errorf("allow: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if n := total.Load(); n > 1000 || n < 900 {
		t.Fatalf("%d admitted of rps 1000 within one moment", n)
	}
}
