package upstream

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/engine"
)

// TestConcurrencyCapEDF: with one slot taken, later requests wait and get
// the slot earliest deadline first, whatever their arrival order.
func TestConcurrencyCapEDF(t *testing.T) {
	f := newFixture(t)
	f.hold = make(chan struct{})
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.MaxConcurrency = 1 })
	errs := make(chan error, 8)
	run := func(text string, due time.Time) {
		go func() { _, err := speak(context.Background(), e, text, due); errs <- err }()
	}
	run("Holder.", time.Time{})
	recv(t, f.started, "the first request")
	now := time.Now()
	for i, d := range []int{3, 1, 4, 2} {
		run([]string{"Three.", "One.", "Four.", "Two."}[i], now.Add(time.Duration(d)*time.Second))
		eventually(t, "the request to wait", func() bool { return waiting(e) == i+1 })
	}
	close(f.hold)
	var order []string
	for range 4 {
		order = append(order, recv(t, f.started, "a waiting request"))
	}
	for range 5 {
		if err := recv(t, errs, "a request to end"); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"One.", "Two.", "Three.", "Four."}; !slices.Equal(order, want) {
		t.Errorf("served %v, want %v", order, want)
	}
	if p := f.peakActive(); p != 1 {
		t.Errorf("%d requests at once at the upstream, cap 1", p)
	}
}

// TestWaitBounds: beyond MaxWaiting waiters, or after MaxWait, ErrBusy.
func TestWaitBounds(t *testing.T) {
	f := newFixture(t)
	f.hold = make(chan struct{})
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) {
		c.MaxConcurrency, c.MaxWaiting, c.MaxWait = 1, 1, 100*time.Millisecond
	})
	errs := make(chan error, 2)
	go func() { _, err := speak(context.Background(), e, "Holder.", time.Time{}); errs <- err }()
	recv(t, f.started, "the first request")
	go func() { _, err := speak(context.Background(), e, "Waiter.", time.Time{}); errs <- err }()
	eventually(t, "the waiter", func() bool { return waiting(e) == 1 })
	_, err := speak(context.Background(), e, "One too many.", time.Time{})
	var busy *BusyError
	if !errors.As(err, &busy) || !errors.Is(err, engine.ErrBusy) {
		t.Errorf("over MaxWaiting: err %v, want a BusyError", err)
	}
	if err := recv(t, errs, "the waiter to give up"); !errors.Is(err, engine.ErrBusy) {
		t.Errorf("after MaxWait: err %v, want ErrBusy", err)
	}
	close(f.hold)
	if err := recv(t, errs, "the holder"); err != nil {
		t.Fatal(err)
	}
	if st := e.Replicas()[0]; st.Outstanding != 0 || st.Requests != 1 {
		t.Errorf("after: %+v", st)
	}
}

// TestLeastOutstanding: a request goes to the replica with the fewest
// requests in flight.
func TestLeastOutstanding(t *testing.T) {
	a, b := newFixture(t), newFixture(t)
	a.hold, b.hold = make(chan struct{}), make(chan struct{})
	e := newEngine(t, []string{a.srv.URL, b.srv.URL}, nil)
	errs := make(chan error, 8)
	run := func() {
		go func() { _, err := speak(context.Background(), e, "Balance.", time.Time{}); errs <- err }()
	}
	outstanding := func() [2]int {
		st := e.Replicas()
		return [2]int{st[0].Outstanding, st[1].Outstanding}
	}
	for range 4 {
		run()
	}
	eventually(t, "4 requests in flight", func() bool { return outstanding() == [2]int{2, 2} })
	close(a.hold)
	for range 2 {
		if err := recv(t, errs, "a's requests"); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a idle", func() bool { return outstanding() == [2]int{0, 2} })
	a.setHold(make(chan struct{}))
	run()
	run()
	eventually(t, "2 more requests on a", func() bool { return outstanding() == [2]int{2, 2} })
	a.release()
	close(b.hold)
	for range 4 {
		if err := recv(t, errs, "the rest"); err != nil {
			t.Fatal(err)
		}
	}
	if na, nb := len(a.requests()), len(b.requests()); na != 4 || nb != 2 {
		t.Errorf("a got %d, b %d; want 4 and 2", na, nb)
	}
}

// TestEjection: three failures in a row eject a replica for EjectFor; it
// then comes back, and one more failure ejects it again.
func TestEjection(t *testing.T) {
	f := newFixture(t)
	var fail atomic.Bool
	fail.Store(true)
	f.before = func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
		if fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return true
		}
		return false
	}
	e := newEngine(t, []string{f.srv.URL}, nil)
	clock := useFakeClock(e)
	for i := range 3 {
		if e.Ready() != nil {
			t.Fatalf("ejected after %d failures", i)
		}
		if _, err := speak(context.Background(), e, "Fail.", time.Time{}); err == nil || errors.Is(err, engine.ErrBusy) {
			t.Fatalf("failure %d: err %v, want upstream_error", i, err)
		}
	}
	st := e.Replicas()[0]
	if st.State != "ejected" || st.Ejections != 1 || st.ErrorsUpstream != 3 || e.Ready() == nil {
		t.Fatalf("after 3 failures: %+v", st)
	}
	// Ejected: refused at once, with the seconds until it returns.
	_, err := speak(context.Background(), e, "Refused.", time.Time{})
	var busy *BusyError
	if !errors.As(err, &busy) || busy.RetryAfter != 5 || len(f.requests()) != 3 {
		t.Fatalf("while ejected: err %v after %d requests", err, len(f.requests()))
	}
	clock.advance(4 * time.Second)
	if e.Replicas()[0].State != "ejected" {
		t.Fatal("back before 5 s")
	}
	clock.advance(time.Second)
	if e.Replicas()[0].State != "up" {
		t.Fatal("not back after 5 s")
	}
	// Back on probation: one failure ejects it again.
	if _, err := speak(context.Background(), e, "Fail again.", time.Time{}); err == nil {
		t.Fatal("no failure")
	}
	if st := e.Replicas()[0]; st.State != "ejected" || st.Ejections != 2 {
		t.Fatalf("after a failure on probation: %+v", st)
	}
	clock.advance(5 * time.Second)
	fail.Store(false)
	if _, err := speak(context.Background(), e, "Healthy.", time.Time{}); err != nil {
		t.Fatal(err)
	}
	// Healthy again: it takes three failures to eject it.
	fail.Store(true)
	for range 2 {
		speak(context.Background(), e, "Fail.", time.Time{})
	}
	if st := e.Replicas()[0]; st.State != "up" {
		t.Fatalf("ejected after 2 failures once healthy: %+v", st)
	}
}

// TestEjectionRefused: connections refused count as failures, and map to
// ErrBusy.
func TestEjectionRefused(t *testing.T) {
	f := newFixture(t)
	url := f.srv.URL
	f.srv.Close() // nothing listens there any more
	e := newEngine(t, []string{url}, nil)
	useFakeClock(e)
	for i := range 3 {
		_, err := speak(context.Background(), e, "Anyone?", time.Time{})
		var busy *BusyError
		if !errors.As(err, &busy) || busy.RetryAfter != 1 {
			t.Fatalf("refused %d: err %v, want BusyError", i, err)
		}
	}
	if st := e.Replicas()[0]; st.State != "ejected" || st.ErrorsBusy != 3 {
		t.Fatalf("after 3 refusals: %+v", st)
	}
}

// TestRetry: a sentence that fails before any audio is retried once on the
// other replica; after its first audio, it is not.
func TestRetry(t *testing.T) {
	tests := []struct {
		name    string
		fail    func(w http.ResponseWriter, r *http.Request, body speechBody) bool
		retried bool
	}{
		{"500", func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
			http.Error(w, "boom", http.StatusInternalServerError)
			return true
		}, true},
		{"503", func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "full", http.StatusServiceUnavailable)
			return true
		}, true},
		// A sentence's first audio leaves with the first read, so "before
		// any audio" is before a whole sample.
		{"cut before a sample", cutAfter(1), true},
		{"cut after the first audio", cutAfter(100), false},
		{"cut after a chunk", cutAfter(4000), false},
		{"422", func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
			http.Error(w, `{"detail":"bad voice"}`, http.StatusUnprocessableEntity)
			return true
		}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newFixture(t), newFixture(t)
			a.before = tc.fail
			e := newEngine(t, []string{a.srv.URL, b.srv.URL}, nil)
			// The first request goes to the first replica (no load yet).
			chunks, err := speak(context.Background(), e, "Retry me.", time.Time{})
			st := e.Replicas()
			if tc.retried {
				if err != nil || len(b.requests()) != 1 || st[1].Retries != 1 {
					t.Fatalf("err %v, %d requests on b, %+v", err, len(b.requests()), st[1])
				}
				if got, want := joined(chunks), samplesOf(render("Retry me.", 0)); !slices.Equal(got, want) {
					t.Errorf("retried audio: %d samples, want %d", len(got), len(want))
				}
				return
			}
			if err == nil || len(b.requests()) != 0 || st[1].Retries != 0 || len(a.requests()) != 1 {
				t.Fatalf("err %v, %d requests on b: want no retry", err, len(b.requests()))
			}
		})
	}
}

// cutAfter writes n bytes of audio, then drops the connection.
func cutAfter(n int) func(w http.ResponseWriter, r *http.Request, body speechBody) bool {
	return func(w http.ResponseWriter, r *http.Request, body speechBody) bool {
		w.Header().Set("Content-Type", "audio/pcm")
		w.Write(render(body.Input, 0)[:n])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return true
	}
}

// TestTimeoutFreesSlot: an upstream that never answers costs the timeout,
// and its slot is free again for the next request.
func TestTimeoutFreesSlot(t *testing.T) {
	f := newFixture(t)
	var hang atomic.Bool
	hang.Store(true)
	f.before = func(w http.ResponseWriter, r *http.Request, _ speechBody) bool {
		if !hang.Load() {
			return false
		}
		<-r.Context().Done()
		f.gone <- struct{}{}
		return true
	}
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.MaxConcurrency, c.Timeout = 1, 200*time.Millisecond })
	_, err := speak(context.Background(), e, "Nobody answers.", time.Time{})
	if err == nil || errors.Is(err, engine.ErrBusy) || errors.Is(err, engine.ErrInvalidInput) || !errors.Is(err, errTimeout) {
		t.Fatalf("err %v, want a timeout (upstream_error)", err)
	}
	recv(t, f.gone, "the upstream to see the request dropped")
	hang.Store(false)
	if _, err := speak(context.Background(), e, "Now it does.", time.Time{}); err != nil {
		t.Fatalf("after a timeout: %v", err)
	}
	if st := e.Replicas()[0]; st.Outstanding != 0 || st.ErrorsUpstream != 1 || st.Completed != 1 {
		t.Errorf("after: %+v", st)
	}
}

// TestCancelWhileWaiting: a request cancelled while it waits for a slot
// leaves the queue, and the slot goes to the next one.
func TestCancelWhileWaiting(t *testing.T) {
	f := newFixture(t)
	f.hold = make(chan struct{})
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.MaxConcurrency = 1 })
	errs := make(chan error, 3)
	go func() { _, err := speak(context.Background(), e, "Holder.", time.Time{}); errs <- err }()
	recv(t, f.started, "the holder")
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _, err := speak(ctx, e, "Cancelled.", time.Now()); errs <- err }()
	eventually(t, "a waiter", func() bool { return waiting(e) == 1 })
	go func() { _, err := speak(context.Background(), e, "Next.", time.Now().Add(time.Hour)); errs <- err }()
	eventually(t, "two waiters", func() bool { return waiting(e) == 2 })
	cancel()
	if err := recv(t, errs, "the cancelled waiter"); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if n := waiting(e); n != 1 {
		t.Fatalf("%d waiting after a cancel, want 1", n)
	}
	close(f.hold)
	for range 2 {
		if err := recv(t, errs, "the others"); err != nil {
			t.Fatal(err)
		}
	}
	if got := recv(t, f.started, "the next request"); got != "Next." {
		t.Errorf("served %q", got)
	}
	if st := e.Replicas()[0]; st.Outstanding != 0 || st.Requests != 2 {
		t.Errorf("after: %+v", st)
	}
}
