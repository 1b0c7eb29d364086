package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"voicesvc/e2e/harness"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// Issue 6 benchmarks through the real binary (reference engine in process,
// unpaced unless said otherwise). Run one at a time, e.g.
//
//	go test ./e2e -run '^$' -bench 'BenchmarkWS' -benchtime 2000x
//
// Latencies are reported as p50/p99 in ms; medians over runs go in the note.

// quantiles reports the p50 and p99 of d in ms under name.
func quantiles(b *testing.B, name string, d []time.Duration) (p50, p99 float64) {
	slices.Sort(d)
	q := func(f float64) float64 {
		return float64(d[min(len(d)-1, int(f*float64(len(d))))].Microseconds()) / 1000
	}
	p50, p99 = q(0.50), q(0.99)
	b.ReportMetric(p50, name+"_p50_ms")
	b.ReportMetric(p99, name+"_p99_ms")
	return p50, p99
}

// perWorker splits b.N ops over n workers (at least one each).
func perWorker(b *testing.B, n int) int { return max(1, b.N/n) }

const benchSentence = "Hello there, this is one sentence."

var errFirst = errors.New("first chunk")

// BenchmarkWSFirstAudio: task_start carrying one complete sentence ->
// first binary frame through the real server, against the same engine
// alone in this process (time to its first chunk), at 1 and 32 sessions.
// After its first binary frame a client cancels the context: this is about
// latency, not about streaming every sentence in full on 2 shared cores.
//
// WS_BENCH_BILLING (off, meter, enforce) sets the server's billing mode:
// with billing on, every task_start is a store write before any audio.
// WS_BENCH_RTF paces the reference engine (default 1, real time, as make
// bench runs it; 0: unpaced, so every context renders its whole sentence
// at once and the server streams all of it before the cancel lands).
//
// WS_BENCH_THINK (default 40ms) is, with several sessions, the most a
// session waits between one context's end and the next task_start,
// uniformly at random, as a voice agent waits for its caller: 32 sessions
// asking back to back keep both cores busy, and the figure then measures
// the queue that saturation builds (Little's law), not the gateway's own
// latency. 0 asks back to back. One session always asks back to back, as
// the engine alone is timed: one request at a time cannot saturate.
func BenchmarkWSFirstAudio(b *testing.B) {
	var extra []string
	if m := os.Getenv("WS_BENCH_BILLING"); m != "" {
		extra = []string{"--billing", m}
	}
	rtf := 1.0
	if v := os.Getenv("WS_BENCH_RTF"); v != "" {
		var err error
		if rtf, err = strconv.ParseFloat(v, 64); err != nil {
			b.Fatal(err)
		}
	}
	think := 40 * time.Millisecond
	if v := os.Getenv("WS_BENCH_THINK"); v != "" {
		var err error
		if think, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	srv, e := wsServer(b, rtf, "enterprise", extra, "--concurrency", "500", "--sessions", "500")
	clientFirst(b, srv)
	for _, n := range []int{1, 32} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			conns := make([]*wsc, n)
			for i := range conns {
				conns[i] = wsOpen(b, srv, e.key)
			}
			per := perWorker(b, n)
			lat := make([][]time.Duration, n)
			// round runs ops contexts on every session at once, recording
			// the latencies when record is set.
			round := func(ops int, record bool) {
				var wg sync.WaitGroup
				for i, c := range conns {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for k := 0; k < ops; k++ {
							if think > 0 && n > 1 {
								time.Sleep(rand.N(think))
							}
							id := "b" + strconv.Itoa(k)
							t0 := time.Now()
							c.start(id, e.voice, benchSentence, true)
							// The cancel answers task_cancelled, or an error
							// when the context was done first.
							cancelled := false
							for {
								ev, err := c.next()
								if err != nil || ev.Type == "close" || ev.Type == "error" && (ev.Fatal || !cancelled) {
									b.Errorf("%v %v", ev, err)
									return
								}
								if !cancelled && ev.Type == "audio_chunk" {
									if record {
										lat[i] = append(lat[i], time.Since(t0))
									}
									cancelled = true
									c.send(map[string]any{"type": "task_cancel", "context_id": id})
								}
								if ev.Type == "task_cancelled" || ev.Type == "error" {
									break
								}
							}
						}
					}()
				}
				wg.Wait()
			}
			// Warm-up, not measured: the first contexts of freshly opened
			// sessions meet empty pools, small stacks and a small heap
			// (their latency told of the server's first second, not of it).
			round(5, false)
			b.ResetTimer()
			round(per, true)
			b.StopTimer()
			srvP50, srvP99 := quantiles(b, "server", slices.Concat(lat...))
			engP50, engP99 := quantiles(b, "engine", engineFirstChunk(b, rtf, n, per))
			b.ReportMetric(srvP50-engP50, "added_p50_ms")
			b.ReportMetric(srvP99-engP99, "added_p99_ms")
		})
	}
}

// engineFirstChunk times the reference engine alone: n goroutines, per
// requests each, from Synthesize to the first chunk.
func engineFirstChunk(b *testing.B, rtf float64, n, per int) []time.Duration {
	eng := reference.New(reference.Options{RTF: rtf})
	prof := reference.MarshalProfile(200)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per; k++ {
				t0 := time.Now()
				err := eng.Synthesize(context.Background(), engine.Request{Text: benchSentence,
					Language: "en", Profile: prof}, func(engine.Chunk) error {
					lat[i] = append(lat[i], time.Since(t0))
					return errFirst
				})
				if !errors.Is(err, errFirst) {
					b.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	return slices.Concat(lat...)
}

// clientFirst puts the server at nice 10, as BenchmarkSynthTTFB does: the
// client stands for one on another machine, and when both want the 2
// cores, a client waiting for one measures the scheduler, not the server.
func clientFirst(b *testing.B, srv *harness.Server) {
	if err := syscall.Setpriority(syscall.PRIO_PROCESS, srv.PID(), 10); err != nil {
		b.Logf("server not reniced (%v): the client competes with it", err)
	}
}

// BenchmarkWSIdleMemory: the server's resident memory per idle open
// session (VmRSS before and after opening them).
func BenchmarkWSIdleMemory(b *testing.B) {
	const n = 1000
	// WS_BENCH_GOGC sets the server's GOGC: RSS also holds the handshakes'
	// garbage not yet collected, which scales with GOGC, not with sessions.
	var env []string
	if g := os.Getenv("WS_BENCH_GOGC"); g != "" {
		env = append(env, "GOGC="+g)
	}
	srv := harness.Start(b, harness.Options{Args: refArgs(0), Env: env})
	e := newEnv(b, srv, "enterprise", "--concurrency", "5000", "--sessions", "5000")
	// Warm up: one session through a synthesis, so lazily built state
	// (pools, code pages) is counted before, not per session.
	c := wsOpen(b, srv, e.key)
	c.start("w", e.voice, "Warm up.", true)
	c.until(is("task_done", "w"))
	c.end()
	// Every round opens n more sessions and keeps them: a round after
	// closing the last one's would reuse the memory they freed, and
	// measure nothing. The metric is the last round's; any round measures
	// the same thing.
	var all []*wsc
	defer func() {
		for _, c := range all {
			c.ws.Close()
		}
	}()
	for i := 0; i < b.N; i++ {
		time.Sleep(time.Second)
		before := rssKiB(b, srv.PID())
		for range n {
			all = append(all, wsOpen(b, srv, e.key))
		}
		time.Sleep(2 * time.Second)
		after := rssKiB(b, srv.PID())
		b.ReportMetric(float64(after-before)/n, "KiB/session")
	}
	runtime.GC()
}

func rssKiB(b *testing.B, pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return kb
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkWSCancel: task_cancel -> task_cancelled while 32 sessions each
// have a real-time paced context speaking. Each session listens to its
// context for a random 0-200 ms before cancelling it mid-speech, so the
// sessions are busy streaming, not churning starts and cancels back to
// back (which would measure a saturated machine's queue instead).
func BenchmarkWSCancel(b *testing.B) {
	const n = 32
	srv, e := wsServer(b, 1, "enterprise", nil, "--concurrency", "500", "--sessions", "500")
	conns := make([]*wsc, n)
	for i := range conns {
		conns[i] = wsOpen(b, srv, e.key)
	}
	text := strings.Repeat("This sentence keeps the engine busy for a while. ", 4)
	per := perWorker(b, n)
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < per; k++ {
				id := "c" + strconv.Itoa(k)
				c.start(id, e.voice, text, true)
				// Listen for a while (the context streams at real time),
				// then cancel mid-speech.
				listen := time.Now().Add(rand.N(200 * time.Millisecond))
				for ev, err := c.next(); ev.Type != "audio_chunk" || time.Now().Before(listen); ev, err = c.next() {
					if err != nil || ev.Type == "error" || ev.Type == "close" || ev.Type == "task_done" {
						b.Errorf("%v %v", ev, err)
						return
					}
				}
				t0 := time.Now()
				c.send(map[string]any{"type": "task_cancel", "context_id": id})
				for ev, err := c.next(); ev.Type != "task_cancelled"; ev, err = c.next() {
					if err != nil || ev.Type == "error" || ev.Type == "close" {
						b.Errorf("%v %v", ev, err)
						return
					}
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	quantiles(b, "cancel", slices.Concat(lat...))
}
