package postgres_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/control/postgres"
)

// twoLimiters returns limiters of two "servers" (two pools) on one schema.
func twoLimiters(t *testing.T, opts postgres.LimiterOptions) (*postgres.Limiter, *postgres.Limiter) {
	t.Helper()
	dsn := MustSchemaDSN(t)
	a, b := MustOpenDB(t, dsn).LimiterWith("server-a", opts), MustOpenDB(t, dsn).LimiterWith("server-b", opts)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestLimiterSlots(t *testing.T) {
	a, b := twoLimiters(t, postgres.LimiterOptions{})
	ctx := t.Context()
	ws := control.NewID()
	l1, free, err := a.Acquire(ctx, ws, control.SlotStream, 2)
	if err != nil || free != 1 {
		t.Fatalf("first: free %d, %v", free, err)
	}
	l2, free, err := b.Acquire(ctx, ws, control.SlotStream, 2)
	if err != nil || free != 0 {
		t.Fatalf("second: free %d, %v", free, err)
	}
	tests := []struct {
		name, ws, kind string
		lim            int
		code           string
	}{
		{"third stream on a", ws, control.SlotStream, 2, control.EConcurrencyLimited},
		{"third stream on b", ws, control.SlotStream, 2, control.EConcurrencyLimited},
		{"sessions counted apart", ws, control.SlotSession, 1, ""},
		{"second session", ws, control.SlotSession, 1, control.ETooManySessions},
		{"other workspace", control.NewID(), control.SlotStream, 2, ""},
		{"no limit", ws, control.SlotStream, 0, ""},
	}
	for i, tt := range tests {
		lim := a
		if i%2 == 1 {
			lim = b
		}
		_, _, err := lim.Acquire(ctx, tt.ws, tt.kind, tt.lim)
		if tt.code == "" && err != nil || tt.code != "" && !control.IsCode(err, tt.code) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.code)
		}
		if tt.code != "" && control.AsError(err).RetryAfter < 1 {
			t.Errorf("%s: no Retry-After", tt.name)
		}
	}
	// Release frees exactly one slot, however often it is called.
	l1.Release()
	l1.Release()
	if _, _, err := a.Acquire(ctx, ws, control.SlotStream, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Acquire(ctx, ws, control.SlotStream, 2); !control.IsCode(err, control.EConcurrencyLimited) {
		t.Fatalf("double release freed two slots: %v", err)
	}
	l2.Release()

	// Many takers on both servers at once: the limit holds exactly.
	ws2 := control.NewID()
	var ok atomic.Int32
	done := make(chan struct{})
	for i := range 20 {
		go func() {
			lim := a
			if i%2 == 1 {
				lim = b
			}
			if _, _, err := lim.Acquire(ctx, ws2, control.SlotStream, 5); err == nil {
				ok.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range 20 {
		<-done
	}
	if ok.Load() != 5 {
		t.Fatalf("%d of 20 concurrent acquires succeeded, limit 5", ok.Load())
	}
}

// TestLimiterLeaseExpiry: renewed leases outlive their TTL; a holder that
// stops renewing (crashed) loses its slots after the TTL.
func TestLimiterLeaseExpiry(t *testing.T) {
	a, b := twoLimiters(t, postgres.LimiterOptions{TTL: time.Second, RenewEvery: 150 * time.Millisecond})
	ctx := t.Context()
	ws := control.NewID()
	if _, _, err := a.Acquire(ctx, ws, control.SlotStream, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if _, _, err := b.Acquire(ctx, ws, control.SlotStream, 1); !control.IsCode(err, control.EConcurrencyLimited) {
		t.Fatalf("a renewed lease was taken over: %v", err)
	}
	a.Close() // the holder "crashes": no release, no more renewals
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, _, err := b.Acquire(ctx, ws, control.SlotStream, 1)
		if err == nil {
			return
		}
		if !control.IsCode(err, control.EConcurrencyLimited) || time.Now().After(deadline) {
			t.Fatalf("slot of a crashed holder never returned: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestLimiterRate(t *testing.T) {
	a, b := twoLimiters(t, postgres.LimiterOptions{})
	ctx := t.Context()
	ws := control.NewID()
	var allowed atomic.Int32
	done := make(chan struct{})
	for i := range 10 {
		go func() {
			lim := a
			if i%2 == 1 {
				lim = b
			}
			d, err := lim.AllowRequest(ctx, ws, 2)
			switch {
			case d.Allowed && err == nil:
				allowed.Add(1)
			case !control.IsCode(err, control.ERateLimited) || control.AsError(err).RetryAfter < 1:
				t.Errorf("refusal error %v", err)
			case d.Limit != 2 || d.Remaining != 0 || d.ResetAfter <= 0 || d.ResetAfter > 1:
				t.Errorf("refusal %+v", d)
			}
			done <- struct{}{}
		}()
	}
	for range 10 {
		<-done
	}
	if allowed.Load() != 2 {
		t.Fatalf("%d of 10 requests in one burst allowed at 2 rps over two servers", allowed.Load())
	}
	if d, err := a.AllowRequest(ctx, ws, 0); err != nil || !d.Allowed {
		t.Fatalf("rps 0 is no limit: %+v %v", d, err)
	}
	if d, err := a.AllowRequest(ctx, control.NewID(), 3); err != nil || !d.Allowed || d.Remaining != 2 || d.ResetAfter != 0 {
		t.Fatalf("first request of a workspace: %+v %v", d, err)
	}
}

// TestLimiterRateLargeLimit: above 64 rps the log is bucketed, and still no
// 1-second window holds more than the limit.
func TestLimiterRateLargeLimit(t *testing.T) {
	a, b := twoLimiters(t, postgres.LimiterOptions{})
	ctx := t.Context()
	ws := control.NewID()
	var allowed atomic.Int32
	var wg sync.WaitGroup
	begin := time.Now()
	for i := range 150 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lim := a
			if i%2 == 1 {
				lim = b
			}
			d, err := lim.AllowRequest(ctx, ws, 100)
			switch {
			case d.Allowed && err == nil:
				allowed.Add(1)
			case !control.IsCode(err, control.ERateLimited) || control.AsError(err).RetryAfter < 1:
				t.Errorf("refusal error %v", err)
			case d.Remaining != 0 || d.ResetAfter <= 0 || d.ResetAfter > 1.02:
				t.Errorf("refusal %+v", d)
			}
		}()
	}
	wg.Wait()
	// On a loaded machine the burst may outlast the window, and later
	// requests are then rightly admitted.
	if span := time.Since(begin); allowed.Load() < 100 || span < time.Second && allowed.Load() != 100 {
		t.Fatalf("%d of 150 allowed at 100 rps within %v", allowed.Load(), span)
	}
	time.Sleep(1100 * time.Millisecond)
	if d, err := a.AllowRequest(ctx, ws, 100); err != nil || !d.Allowed || d.Remaining != 99 {
		t.Fatalf("a second later: %+v %v", d, err)
	}
}

// TestLimiterReleaseAsync: Release returns at once; the slot is free for
// this server immediately, for other servers shortly after, and releases
// still queued at Close are not lost.
func TestLimiterReleaseAsync(t *testing.T) {
	a, b := twoLimiters(t, postgres.LimiterOptions{})
	ctx := t.Context()
	ws := control.NewID()
	l1, _, err := a.Acquire(ctx, ws, control.SlotStream, 1)
	if err != nil {
		t.Fatal(err)
	}
	l1.Release()
	l2, _, err := a.Acquire(ctx, ws, control.SlotStream, 1)
	if err != nil {
		t.Fatalf("own release not seen: %v", err)
	}
	l2.Release()
	deadline := time.Now().Add(2 * time.Second)
	for {
		l3, _, err := b.Acquire(ctx, ws, control.SlotStream, 1)
		if err == nil {
			l3.Release()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("release never reached the other server: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Many releases then Close: every slot comes back.
	ws2 := control.NewID()
	dsn := MustSchemaDSN(t)
	c := MustOpenDB(t, dsn).Limiter("server-c")
	d := MustOpenDB(t, dsn).Limiter("server-d")
	defer d.Close()
	var leases []control.Lease
	for range 5 {
		l, _, err := c.Acquire(ctx, ws2, control.SlotStream, 5)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	for _, l := range leases {
		l.Release()
	}
	c.Close()
	for i := range 5 {
		if _, _, err := d.Acquire(ctx, ws2, control.SlotStream, 5); err != nil {
			t.Fatalf("slot %d not freed by Close: %v", i, err)
		}
	}
}
