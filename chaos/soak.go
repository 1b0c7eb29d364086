package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SoakOpts shape a soak run.
type SoakOpts struct {
	Duration time.Duration // total run (default 1 h)
	Rate     float64       // requests per second, every kind together (default 20)
	Sample   time.Duration // resource sampling interval (default 1 min)
	OutDir   string        // where the CSV and the summary go

	// Faults injects the upstream and store faults in turn (soak_faults.go).
	Faults      bool
	FaultWindow time.Duration // an upstream window's length (default 20 s)
	FaultEvery  time.Duration // one window starts this often (default min(2 min, Duration/14), at least FaultWindow+10 s)
}

// soakSample is one row of the CSV.
type soakSample struct {
	at                  time.Duration
	rss                 int64
	goroutines, fds     int
	requests, errors    int64
	inFlight, saturated int64
	note                string // "checkpoint", or the fault open when it was taken
}

// soakTexts vary the work a little; each is one or two short sentences.
var soakTexts = []string{
	"Hello there, how can I help you today?",
	"The weather is mild, with a light breeze from the west.",
	"Your order has shipped. It should arrive on Thursday.",
	"Please hold while I look that up for you.",
	"One, two, three, four, five.",
}

// soakGrowth is how much RSS, goroutines and descriptors may grow from the
// checkpoint after the first minutes to the one at the end.
const soakGrowth = 0.10

// baseMark is when the base checkpoint is taken: after 5 minutes, or a
// sixth of a shorter run.
func baseMark(d time.Duration) time.Duration { return min(5*time.Minute, d/6) }

// Soak runs steady mixed traffic (speak, SSE, realtime, compat) against a
// server of its own for opts.Duration, samples the server's RSS,
// goroutines and descriptors, writes a CSV and a summary under OutDir and
// prints the summary to w. Two samples are checkpoints, taken quiesced (no
// request in flight, no fault open, the clients' idle connections closed,
// 3 s to settle, goroutines and fds the least of three reads a second
// apart): one at baseMark, one at the end. It reports false when
// the server died, answered a 500, more than 0.1% of requests failed
// without a fault to excuse them, or RSS, goroutines or descriptors grew
// more than 10% between the checkpoints. Memory stays bounded: requests in
// flight are capped and only counters are kept.
func (s *Suite) Soak(ctx context.Context, o SoakOpts, w io.Writer) (bool, error) {
	if o.Duration <= 0 {
		o.Duration = time.Hour
	}
	if o.Rate <= 0 {
		o.Rate = 20
	}
	if o.Sample <= 0 {
		o.Sample = time.Minute
	}
	if o.FaultWindow <= 0 {
		o.FaultWindow = 20 * time.Second
	}
	if o.FaultEvery <= 0 {
		o.FaultEvery = max(min(2*time.Minute, o.Duration/time.Duration(2*len(faultNames()))).Round(time.Second), o.FaultWindow+10*time.Second)
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return false, err
	}
	stamp := time.Now().UTC().Format("20060102-150405")
	csvPath := filepath.Join(o.OutDir, "soak-"+stamp+".csv")
	csv, err := os.Create(csvPath)
	if err != nil {
		return false, err
	}
	defer csv.Close()
	fmt.Fprintln(csv, "elapsed_s,rss_kib,goroutines,fds,requests,errors,in_flight,client_saturated,note")

	var faults *soakFaults
	var args []string
	if o.Faults {
		if faults, args, err = s.startSoakFaults(o.FaultWindow, o.FaultEvery); err != nil {
			return false, err
		}
	}
	srv, err := s.StartServer("soak", ServerOpts{Args: args})
	if err != nil {
		return false, err
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "500", "--sessions", "500")
	if err != nil {
		return false, err
	}
	mode := "espeak"
	if faults != nil {
		if err := faults.attach(srv, e); err != nil {
			return false, err
		}
		mode = fmt.Sprintf("espeak; faults: %s in turn, one every %v", strings.Join(faultNames(), ", "), o.FaultEvery)
	}
	mark := baseMark(o.Duration)
	s.logf("soak: server pid %d, %v at %.0f req/s (%s), base checkpoint at %v, CSV %s", srv.PID(), o.Duration, o.Rate, mode, mark, csvPath)

	var (
		requests, failures, excused, serverErrs, inFlight, saturated atomic.Int64
		mu                                                           sync.Mutex
		errs                                                         = map[string]int64{}
		byKind                                                       = map[string]int64{}
		wg                                                           sync.WaitGroup
		samples                                                      []soakSample
		start                                                        time.Time
	)
	kinds := []struct {
		name string
		do   func(text string) string // "" on success, else the outcome
	}{
		{"speak", func(t string) string { return okOr(e.Speak(t), 200) }},
		{"sse", func(t string) string { return soakSSE(e, t) }},
		{"ws", func(t string) string { return soakWS(e, t) }},
		{"compat", func(t string) string {
			return okOr(Call("POST", srv.API+"/compat/audio/speech",
				map[string]any{"model": "service-v1", "voice": e.Voice, "input": t, "response_format": "wav"},
				"Authorization", "Bearer "+e.Key), 200)
		}},
	}
	// sample reads the server (goroutines and fds given: a checkpoint's).
	sample := func(at time.Duration, note string, given ...int) soakSample {
		gors, fds := 0, 0
		if len(given) == 2 {
			gors, fds = given[0], given[1]
		} else {
			gors, fds = srv.Goroutines(), srv.FDs()
		}
		sm := soakSample{at: at, rss: srv.RSS(), goroutines: gors, fds: fds,
			requests: requests.Load(), errors: failures.Load(), inFlight: inFlight.Load(), saturated: saturated.Load(), note: note}
		samples = append(samples, sm)
		fmt.Fprintf(csv, "%d,%d,%d,%d,%d,%d,%d,%d,%s\n", int(sm.at.Seconds()), sm.rss>>10, sm.goroutines, sm.fds,
			sm.requests, sm.errors, sm.inFlight, sm.saturated, sm.note)
		s.logf("soak %v: RSS %s, %d goroutines, %d fds, %d requests, %d errors %s", at.Round(time.Second),
			mib(sm.rss), sm.goroutines, sm.fds, sm.requests, sm.errors, sm.note)
		return sm
	}
	// checkpoint samples the server quiesced; the caller keeps faults out.
	checkpoint := func() soakSample {
		waitFor(2*time.Minute, func() bool { return inFlight.Load() == 0 })
		if faults != nil {
			waitFor(30*time.Second, func() bool { return faults.up.open.Load() == 0 })
		}
		httpClient.CloseIdleConnections()
		upClient.CloseIdleConnections()
		// The store mix's client and Goroutines' own: the default transport.
		http.DefaultTransport.(*http.Transport).CloseIdleConnections()
		time.Sleep(3 * time.Second)
		// The least of three reads a second apart: a goroutine or a
		// descriptor that only passes through (a timer's, a sampler's
		// connection) is not a leak; a leaked one stays in all three.
		gors, fds := srv.Goroutines(), srv.FDs()
		for range 2 {
			time.Sleep(time.Second)
			gors, fds = min(gors, srv.Goroutines()), min(fds, srv.FDs())
		}
		return sample(time.Since(start), "checkpoint", gors, fds)
	}
	// book books one answer of the steady traffic.
	book := func(kind, out string, win *faultWindow) {
		requests.Add(1)
		mu.Lock()
		defer mu.Unlock()
		byKind[kind]++
		if faults.record(win, out) {
			excused.Add(1)
			return
		}
		if out == "" {
			return
		}
		if isServerError(out) {
			serverErrs.Add(1)
		}
		failures.Add(1)
		key := short(kind + " " + out)
		if win != nil {
			key += " (in " + win.fault + " window)"
		}
		if len(errs) < 50 || errs[key] > 0 {
			errs[key]++
		}
	}
	// bookAimed books one answer of a request aimed at the fault kind.
	bookAimed := func(kind string, out upOutcome, win *faultWindow) {
		ok := faults.recordAimed(win, kind, out)
		requests.Add(1)
		mu.Lock()
		defer mu.Unlock()
		label := "hostile"
		if kind == storeFault {
			label = "store"
		}
		byKind[label]++
		if ok && !isServerError(out.outcome) {
			excused.Add(1)
			return
		}
		if isServerError(out.outcome) {
			serverErrs.Add(1)
		}
		failures.Add(1)
		key := short(label + " " + kind + " " + out.what + " " + out.outcome)
		if len(errs) < 50 || errs[key] > 0 {
			errs[key]++
		}
	}

	start = time.Now()
	sample(0, "")
	if faults != nil {
		go faults.run(ctx, start)
	}
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
	defer tick.Stop()
	samp := time.NewTicker(o.Sample)
	defer samp.Stop()
	end := time.After(o.Duration)
	const maxInFlight = 64 // a stalled server shows as saturation, not as client memory
	var base *soakSample
	i, hi := 0, 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-samp.C:
			sample(time.Since(start), faults.openNote())
		case <-tick.C:
			if base == nil && time.Since(start) >= mark && (faults == nil || faults.gate.TryLock()) {
				sm := checkpoint()
				base = &sm
				if faults != nil {
					faults.gate.Unlock()
				}
				continue
			}
			if inFlight.Load() >= maxInFlight {
				saturated.Add(1)
				continue
			}
			fm := faults.begin()
			inFlight.Add(1)
			wg.Add(1)
			if kind := faults.aimedKind(); kind != "" && i%4 == 3 {
				// A quarter of the traffic is aimed at the open fault.
				i++
				n := hi
				hi++
				go func() {
					defer wg.Done()
					defer inFlight.Add(-1)
					bookAimed(kind, faults.aimedRequest(kind, n), faults.windowOf(fm))
				}()
				continue
			}
			k, text := kinds[i%len(kinds)], soakTexts[(i/len(kinds))%len(soakTexts)]
			i++
			go func() {
				defer wg.Done()
				defer inFlight.Add(-1)
				book(k.name, k.do(text), faults.windowOf(fm))
			}()
		}
	}
	if faults != nil {
		faults.finish()
	}
	wg.Wait()
	last := checkpoint()
	took := time.Since(start)

	var b strings.Builder
	fmt.Fprintf(&b, "soak %s: %v at %.0f req/s against pid %d (%s)\n", stamp, took.Round(time.Second), o.Rate, srv.PID(), mode)
	fmt.Fprintf(&b, "%-10s %10s %11s %6s %10s %8s\n", "point", "RSS", "goroutines", "fds", "requests", "errors")
	for _, p := range summaryPoints(samples, o.Duration) {
		fmt.Fprintf(&b, "%-10s %10s %11d %6d %10d %8d\n", p.label, mib(p.rss), p.goroutines, p.fds, p.requests, p.errors)
	}
	mu.Lock()
	var kk []string
	for k, v := range byKind {
		kk = append(kk, fmt.Sprintf("%s %d", k, v))
	}
	var ek []string
	for k, v := range errs {
		ek = append(ek, fmt.Sprintf("%s x%d", k, v))
	}
	mu.Unlock()
	sort.Strings(kk)
	sort.Strings(ek)
	fmt.Fprintf(&b, "requests: %d (%s); client saturated (skipped ticks): %d\n", requests.Load(), strings.Join(kk, ", "), saturated.Load())
	if faults != nil {
		fmt.Fprintf(&b, "answers the open fault allows (answers of the requests aimed at a fault within the contract, store_unavailable in the lock): %d\n", excused.Load())
		b.WriteString(faults.report())
	}
	fmt.Fprintf(&b, "errors: %d %s\n", failures.Load(), orNone(ek, ""))
	fmt.Fprintf(&b, "500s (or internal errors on a stream): %d\n", serverErrs.Load())
	growthOK, growth := checkGrowth(base, last)
	b.WriteString(growth)
	alive := srv.Alive()
	n := requests.Load()
	errorsOK := failures.Load()*1000 <= n
	ok := alive && serverErrs.Load() == 0 && errorsOK && growthOK
	logPath := filepath.Join(o.OutDir, "soak-"+stamp+".log")
	os.WriteFile(logPath, []byte(srv.Logs()), 0o644)
	fmt.Fprintf(&b, "server alive at the end: %v\nCSV: %s\nserver log (its first 16 MiB): %s\n", alive, csvPath, logPath)
	fmt.Fprintf(&b, "verdict: %s (server alive %v; no 500 %v; unexcused errors <= 0.1%% %v; growth <= %.0f%% %v)\n",
		map[bool]string{true: "PASS", false: "FAIL"}[ok], alive, serverErrs.Load() == 0, errorsOK, soakGrowth*100, growthOK)
	io.WriteString(w, b.String())
	os.WriteFile(filepath.Join(o.OutDir, "soak-"+stamp+".txt"), []byte(b.String()), 0o644)
	os.Remove(filepath.Join(o.OutDir, "latest.txt"))
	os.Symlink("soak-"+stamp+".txt", filepath.Join(o.OutDir, "latest.txt"))
	return ok, nil
}

// checkGrowth applies the end check: RSS, goroutines and descriptors at
// the end checkpoint within soakGrowth of the base checkpoint (growth
// fails; a drop is reported, not failed).
func checkGrowth(base *soakSample, last soakSample) (bool, string) {
	if base == nil {
		return false, "end check: FAIL, the run ended before the base checkpoint\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "end check (quiesced checkpoints, %s -> %s, at most +%.0f%%):", fmtClock(base.at), fmtClock(last.at), soakGrowth*100)
	ok := true
	for _, m := range []struct {
		name       string
		base, last float64
		show       func(float64) string
	}{
		{"RSS", float64(base.rss), float64(last.rss), func(v float64) string { return mib(int64(v)) }},
		{"goroutines", float64(base.goroutines), float64(last.goroutines), func(v float64) string { return fmt.Sprint(int(v)) }},
		{"fds", float64(base.fds), float64(last.fds), func(v float64) string { return fmt.Sprint(int(v)) }},
	} {
		good := m.base > 0 && m.last >= 0 && m.last <= m.base*(1+soakGrowth)
		ok = ok && good
		verdict := "ok"
		if !good {
			verdict = "FAIL"
		}
		pct := 0.0
		if m.base > 0 {
			pct = (m.last/m.base - 1) * 100
		}
		fmt.Fprintf(&b, " %s %s -> %s (%+.1f%%) %s;", m.name, m.show(m.base), m.show(m.last), pct, verdict)
	}
	return ok, strings.TrimSuffix(b.String(), ";") + "\n"
}

type summaryPoint struct {
	label string
	soakSample
}

// summaryPoints are the samples nearest the start, the middle and the end
// of the run ("30 min" and "60 min" for an hour).
func summaryPoints(samples []soakSample, d time.Duration) []summaryPoint {
	if len(samples) == 0 {
		return nil
	}
	nearest := func(at time.Duration) soakSample {
		best := samples[0]
		for _, sm := range samples {
			if abs(sm.at-at) < abs(best.at-at) {
				best = sm
			}
		}
		return best
	}
	last, mid := samples[len(samples)-1], nearest(d/2)
	return []summaryPoint{
		{"start", samples[0]},
		{fmtMin(mid.at), mid},
		{fmtMin(last.at), last},
	}
}

func fmtMin(d time.Duration) string { return fmt.Sprintf("%.0f min", d.Minutes()) }

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func okOr(r *Resp, want int) string {
	if r.Status == want {
		return ""
	}
	return r.Outcome()
}

func soakSSE(e *Env, text string) string {
	evs, err := e.SSE(text, time.Minute)
	if err != nil {
		return "stream " + shortErr(err)
	}
	if t := lastType(evs); t != "done" {
		if t == "error" {
			return "stream ended with error " + evs[len(evs)-1].Code()
		}
		return "stream ended with " + t
	}
	return ""
}

func soakWS(e *Env, text string) string {
	c, err := e.DialWS()
	if err != nil {
		return "handshake " + shortErr(err)
	}
	defer c.Close()
	c.WriteJSON(map[string]any{"type": "task_start", "context_id": "s", "voice_id": e.Voice, "text": text, "finalize": true})
	got := ""
	ReadWS(c, time.Minute, func(f WSFrame) bool {
		switch f.Type() {
		case "task_done":
			got = "done"
			return false
		case "task_failed", "error":
			c, _ := f.JSON["code"].(string)
			got = f.Type() + " " + c
			return false
		}
		return true
	})
	if got != "done" {
		if got == "" {
			got = "no task_done"
		}
		return got
	}
	c.WriteJSON(map[string]any{"type": "session_end"})
	return ""
}
