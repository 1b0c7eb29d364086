package chaos

import (
	"context"
	"fmt"
	"io"
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
}

// soakSample is one row of the CSV.
type soakSample struct {
	at                  time.Duration
	rss                 int64
	goroutines, fds     int
	requests, errors    int64
	inFlight, saturated int64
}

// soakTexts vary the work a little; each is one or two short sentences.
var soakTexts = []string{
	"Hello there, how can I help you today?",
	"The weather is mild, with a light breeze from the west.",
	"Your order has shipped. It should arrive on Thursday.",
	"Please hold while I look that up for you.",
	"One, two, three, four, five.",
}

// Soak runs steady mixed traffic (speak, SSE, realtime, compat) against a
// server of its own for opts.Duration, samples the server's RSS,
// goroutines and descriptors, writes a CSV and a summary under OutDir and
// prints the summary to w. It reports false when the server died or more
// than 0.1% of requests failed. Memory stays bounded: requests in flight
// are capped and only counters are kept.
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
	fmt.Fprintln(csv, "elapsed_s,rss_kib,goroutines,fds,requests,errors,in_flight,client_saturated")

	srv, err := s.StartServer("soak", ServerOpts{})
	if err != nil {
		return false, err
	}
	defer srv.Stop()
	e, err := s.NewEnv(srv, "enterprise", "--billing", "off", "--rps", "0", "--concurrency", "500", "--sessions", "500")
	if err != nil {
		return false, err
	}
	s.logf("soak: server pid %d, %v at %.0f req/s, CSV %s", srv.PID(), o.Duration, o.Rate, csvPath)

	var (
		requests, failures, inFlight, saturated atomic.Int64
		mu                                      sync.Mutex
		errs                                    = map[string]int64{}
		byKind                                  = map[string]int64{}
		wg                                      sync.WaitGroup
		samples                                 []soakSample
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
	sample := func(at time.Duration) {
		sm := soakSample{at: at, rss: srv.RSS(), goroutines: srv.Goroutines(), fds: srv.FDs(),
			requests: requests.Load(), errors: failures.Load(), inFlight: inFlight.Load(), saturated: saturated.Load()}
		samples = append(samples, sm)
		fmt.Fprintf(csv, "%d,%d,%d,%d,%d,%d,%d,%d\n", int(sm.at.Seconds()), sm.rss>>10, sm.goroutines, sm.fds,
			sm.requests, sm.errors, sm.inFlight, sm.saturated)
		s.logf("soak %v: RSS %s, %d goroutines, %d fds, %d requests, %d errors", at.Round(time.Second),
			mib(sm.rss), sm.goroutines, sm.fds, sm.requests, sm.errors)
	}

	start := time.Now()
	sample(0)
	tick := time.NewTicker(time.Duration(float64(time.Second) / o.Rate))
	defer tick.Stop()
	samp := time.NewTicker(o.Sample)
	defer samp.Stop()
	end := time.After(o.Duration)
	const maxInFlight = 64 // a stalled server shows as saturation, not as client memory
	i := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-samp.C:
			sample(time.Since(start))
		case <-tick.C:
			if inFlight.Load() >= maxInFlight {
				saturated.Add(1)
				continue
			}
			k, text := kinds[i%len(kinds)], soakTexts[(i/len(kinds))%len(soakTexts)]
			i++
			inFlight.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer inFlight.Add(-1)
				out := k.do(text)
				requests.Add(1)
				mu.Lock()
				byKind[k.name]++
				if out != "" {
					failures.Add(1)
					key := k.name + " " + out
					if len(errs) < 50 || errs[key] > 0 {
						errs[key]++
					}
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	sample(time.Since(start))

	var b strings.Builder
	fmt.Fprintf(&b, "soak %s: %v at %.0f req/s against pid %d (espeak)\n", stamp, time.Since(start).Round(time.Second), o.Rate, srv.PID())
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
	fmt.Fprintf(&b, "errors: %d %s\n", failures.Load(), orNone(ek, ""))
	alive := srv.Alive()
	fmt.Fprintf(&b, "server alive at the end: %v\nCSV: %s\n", alive, csvPath)
	io.WriteString(w, b.String())
	os.WriteFile(filepath.Join(o.OutDir, "soak-"+stamp+".txt"), []byte(b.String()), 0o644)
	os.Remove(filepath.Join(o.OutDir, "latest.txt"))
	os.Symlink("soak-"+stamp+".txt", filepath.Join(o.OutDir, "latest.txt"))
	n := requests.Load()
	return alive && failures.Load()*1000 <= n, nil
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
