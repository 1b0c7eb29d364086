package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The soak's fault mode (issue 26): while the steady traffic runs, the
// faults of the upstream probes (the suite's hostile upstream, each kind an
// engine of the soak's server) and of the store probes (the server's SQLite
// file held under BEGIN EXCLUSIVE by this process) are injected in turn, one
// bounded window at a time with recovery between them. During a window a
// quarter of the traffic is aimed at the fault: in an upstream window it
// speaks with that kind's voice, in the store window it runs the store
// probes' mix (a token minted is a write); the rest is the steady traffic.
// Every answer is recorded against the window it overlapped.

// storeFault is the name of the store window in the cycle.
const storeFault = "sqlite-lock"

// faultNames is the cycle: every upstream kind, then the store lock.
func faultNames() []string { return append(append([]string{}, upKinds...), storeFault) }

// faultWindow is what one window saw.
type faultWindow struct {
	n            int
	fault        string
	at, took     time.Duration
	aimed        map[string]int // "wav 502 upstream_error" -> count: the requests aimed at the fault
	other        map[string]int // the steady traffic meanwhile ("ok" for a success)
	slowAimed    time.Duration  // the slowest of them
	note         string         // a lock that could not be taken, a slow recovery
	hostileSlots int            // voicesvc_upstream_outstanding for the kind's engine once the window ended
}

// soakFaults injects the faults and attributes answers to windows.
type soakFaults struct {
	up     *hostileUpstream
	srv    *Server
	env    *Env
	voices map[string]string // kind -> voice id
	store  []func() *Resp    // the store probes' requests, as the soak's workspace
	stores []string          // their names
	window time.Duration     // an upstream window's length
	every  time.Duration     // one window starts this often
	logf   func(string, ...any)

	// gate is held while a window is open, and by a checkpoint: neither
	// starts while the other runs.
	gate   sync.Mutex
	active atomic.Int32 // number of the open window, 0 when none
	seq    atomic.Int32 // windows begun
	kind   atomic.Value // the fault of the open window ("" otherwise)

	mu      sync.Mutex
	windows []*faultWindow

	stop chan struct{}
	done chan struct{}
}

// startSoakFaults starts the hostile upstream and writes the server's
// configuration; the caller starts the server with the returned
// arguments, then calls attach.
func (s *Suite) startSoakFaults(window, every time.Duration) (*soakFaults, []string, error) {
	up, err := startHostileUpstream()
	if err != nil {
		return nil, nil, err
	}
	s.OnClose(up.Close)
	dir, err := os.MkdirTemp(s.Tmp, "soak-upstream-")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := writeUpstreamConfig(dir, up.URL())
	if err != nil {
		return nil, nil, err
	}
	f := &soakFaults{up: up, window: window, every: every, logf: s.logf, stop: make(chan struct{}), done: make(chan struct{})}
	f.kind.Store("")
	return f, []string{"--config", cfg}, nil
}

// attach finds the hostile voices on the soak's server.
func (f *soakFaults) attach(srv *Server, e *Env) error {
	f.srv, f.env = srv, e
	var err error
	f.stores, f.store = storeRequests(e, &http.Client{Timeout: 15 * time.Second})
	f.voices, err = upstreamVoices(e)
	return err
}

// run injects the faults in turn until finish: the first half a period in,
// then one each period (later when a checkpoint holds the gate).
func (f *soakFaults) run(ctx context.Context, start time.Time) {
	defer close(f.done)
	names := faultNames()
	next := start.Add(f.every / 2)
	for n := 1; ; n++ {
		if !f.sleep(time.Until(next)) {
			return
		}
		f.gate.Lock()
		w := &faultWindow{n: n, fault: names[(n-1)%len(names)], at: time.Since(start),
			aimed: map[string]int{}, other: map[string]int{}, hostileSlots: -1}
		f.mu.Lock()
		f.windows = append(f.windows, w)
		f.mu.Unlock()
		f.seq.Add(1)
		f.active.Store(int32(n))
		f.logf("soak %v: fault window %d: %s", w.at.Round(time.Second), n, w.fault)
		began := time.Now()
		if w.fault == storeFault {
			f.holdStore(ctx, w)
		} else {
			f.kind.Store(w.fault)
			f.sleep(f.window)
			f.kind.Store("")
		}
		f.active.Store(0)
		w.took = time.Since(began)
		f.gate.Unlock()
		if w.fault != storeFault {
			// The requests of the window end within the sentence timeout;
			// then the engine's slots must be free again.
			waitFor(upSentenceTimeout+2*upSlack, func() bool { return upstreamOutstanding(f.srv, "u-"+w.fault) == 0 })
			slots := upstreamOutstanding(f.srv, "u-"+w.fault)
			f.mu.Lock()
			w.hostileSlots = slots
			f.mu.Unlock()
		}
		next = next.Add(f.every)
		if now := time.Now(); next.Before(now) {
			next = now
		}
	}
}

// holdStore holds the SQLite file for sqliteHold (less when the soak
// ends), then waits until a speak succeeds again: the window lasts until
// the server has recovered.
func (f *soakFaults) holdStore(ctx context.Context, w *faultWindow) {
	if !strings.HasPrefix(f.srv.DB, "sqlite://") {
		w.note = "store is not SQLite: no lock"
		return
	}
	lock, err := lockSQLite(ctx, f.srv.DB)
	if err != nil {
		w.note = err.Error()
		return
	}
	f.kind.Store(storeFault)
	f.sleep(sqliteHold)
	if err := lock.release(); err != nil {
		w.note = err.Error()
	}
	defer f.kind.Store("")
	t := time.Now()
	if !waitFor(30*time.Second, func() bool { return f.env.Speak("Back.").Status == 200 }) {
		w.note = "not recovered 30 s after the lock"
	} else if d := time.Since(t); d > 2*time.Second {
		w.note = fmt.Sprintf("recovered %v after the lock", d.Round(100*time.Millisecond))
	}
}

// sleep waits d or until finish; false when finishing.
func (f *soakFaults) sleep(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-f.stop:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-f.stop:
		return false
	case <-t.C:
		return true
	}
}

// finish ends the open window early and stops the cycle.
func (f *soakFaults) finish() {
	close(f.stop)
	<-f.done
}

// aimedKind is the fault a share of the traffic is aimed at now ("" when
// no window is open).
func (f *soakFaults) aimedKind() string {
	if f == nil {
		return ""
	}
	return f.kind.Load().(string)
}

// openNote names the open window for the CSV ("" when none).
func (f *soakFaults) openNote() string {
	if f == nil {
		return ""
	}
	n := f.active.Load()
	if n == 0 {
		return ""
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return "fault " + f.windows[n-1].fault
}

// faultMark is where a request stood when it began: the open window and the
// number of windows begun.
type faultMark struct{ active, seq int32 }

func (f *soakFaults) begin() faultMark {
	if f == nil {
		return faultMark{}
	}
	return faultMark{f.active.Load(), f.seq.Load()}
}

// windowOf is the window a request that began at m overlapped (nil: none):
// the one open at its start, else the one open at its end, else the last
// one begun while it ran.
func (f *soakFaults) windowOf(m faultMark) *faultWindow {
	if f == nil {
		return nil
	}
	n := m.active
	if n == 0 {
		n = f.active.Load()
	}
	if n == 0 {
		if seq := f.seq.Load(); seq != m.seq {
			n = seq
		}
	}
	if n == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows[n-1]
}

// record counts one answer of the steady traffic ("" a success) against
// its window and reports whether the fault excuses a failure: 503
// store_unavailable (or a stream ending with it) in the store window.
func (f *soakFaults) record(w *faultWindow, outcome string) (excused bool) {
	if w == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := outcome
	if key == "" {
		key = "ok"
	}
	w.other[short(key)]++
	return outcome != "" && w.fault == storeFault && strings.Contains(outcome, "store_unavailable")
}

// recordAimed counts one request aimed at the fault kind and reports
// whether its outcome is one the contract allows. For the store: a success
// or 503 store_unavailable. For a hostile voice: 502 upstream_error (a cut
// raw stream, an SSE error event), 503 upstream_busy once the engine's
// replica is ejected, and for garbage also audio.
func (f *soakFaults) recordAimed(w *faultWindow, kind string, o upOutcome) bool {
	ok := upFailed(o) || o.outcome == "503 upstream_busy" || o.outcome == "sse error upstream_busy" ||
		(kind == "garbage" && (o.outcome == "200" || o.outcome == `sse ended with "done"`))
	if kind == storeFault {
		ok = strings.HasPrefix(o.outcome, "2") || o.outcome == "503 store_unavailable"
	}
	if w == nil {
		return ok
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := o.outcome
	if !strings.HasPrefix(key, o.what+" ") {
		key = o.what + " " + key
	}
	w.aimed[short(key)]++
	if o.took > w.slowAimed {
		w.slowAimed = o.took
	}
	return ok
}

// aimedRequest is the i-th request aimed at kind: the store mix in turn,
// or WAV, raw s16le and SSE in turn on the hostile voice.
func (f *soakFaults) aimedRequest(kind string, i int) upOutcome {
	if kind == storeFault {
		k := i % len(f.store)
		start := time.Now()
		r := f.store[k]()
		return upOutcome{what: f.stores[k], outcome: r.Outcome(), took: time.Since(start)}
	}
	voice := f.voices[kind]
	switch i % 3 {
	case 0:
		return upSpeak(f.env, voice, "wav")
	case 1:
		return upSpeak(f.env, voice, "s16le")
	}
	return upSSE(f.env, voice)
}

// report is the windows' table for the summary.
func (f *soakFaults) report() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "fault windows: %d (each upstream kind %v, the store lock %v; one every %v)\n",
		len(f.windows), f.window, sqliteHold, f.every)
	for _, w := range f.windows {
		fmt.Fprintf(&b, "  #%-3d %6s %-16s %5s  ", w.n, fmtClock(w.at), w.fault, w.took.Round(time.Second))
		if w.fault == storeFault {
			fmt.Fprintf(&b, "store mix: %s (slowest %v); ", counts(w.aimed), w.slowAimed.Round(100*time.Millisecond))
		} else {
			fmt.Fprintf(&b, "hostile: %s (slowest %v, slots after %d); ", counts(w.aimed),
				w.slowAimed.Round(100*time.Millisecond), w.hostileSlots)
		}
		fmt.Fprintf(&b, "steady: %s", counts(w.other))
		if w.note != "" {
			fmt.Fprintf(&b, "; NOTE %s", w.note)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// short keeps outcome keys bounded (transport errors carry addresses).
func short(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func fmtClock(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// isServerError: a 500 or its stream equivalents (an error event or a
// failed task with code internal). The soak fails on any.
func isServerError(outcome string) bool {
	return strings.HasPrefix(outcome, "500") || strings.HasSuffix(outcome, " internal")
}
