package espeak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/worker"
)

// workerEnv makes the test binary an espeak-ng worker child (the
// helper-process trick), as `voicesvc engine-worker` is in production.
const workerEnv = "VOICESVC_TEST_ESPEAK_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		e, err := New()
		if err == nil {
			err = worker.Serve(os.Stdin, os.Stdout, e)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func subprocessWorker(int) (engine.Worker, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=1")
	return worker.Start(cmd)
}

const tenWords = "The quick brown fox jumps over the lazy dog today. And then it rests."

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// firstChunk measures, over b.N syntheses of a 10-word first sentence,
// the median time from the call to the first chunk, and the speed of the
// whole rendering in multiples of real time.
func firstChunk(b *testing.B, e engine.Engine) {
	b.Helper()
	firstChunkAt(b, e, 0)
}

// firstChunkAt is firstChunk at a speed (0: the default).
func firstChunkAt(b *testing.B, e engine.Engine, speed float64) {
	b.Helper()
	req := engine.Request{Text: tenWords, Language: "en-US", Params: engine.Params{Speed: speed}}
	var firsts []time.Duration
	var audio, wall time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		var first time.Duration
		samples := 0
		err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
			if first == 0 {
				first = time.Since(start)
			}
			samples += len(c.Samples)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		wall += time.Since(start)
		audio += time.Duration(float64(samples) / float64(e.NativeRate()) * float64(time.Second))
		firsts = append(firsts, first)
	}
	b.ReportMetric(float64(median(firsts).Microseconds())/1000, "first-chunk-ms-p50")
	b.ReportMetric(audio.Seconds()/wall.Seconds(), "x-realtime")
	b.ReportMetric(wall.Seconds()/audio.Seconds(), "rtf")
}

// BenchmarkEngine: the espeak-ng engine directly (first chunk = first PCM
// callback plus the one buffer held back to mark Last).
func BenchmarkEngine(b *testing.B) {
	firstChunk(b, mustNew(b))
}

// BenchmarkEngineSpeed: the first chunk and the rendering speed across
// the speed range (time-stretched but at 1: stretch.go), in the eager mode
// the gateway's own process uses and in the workers' default.
func BenchmarkEngineSpeed(b *testing.B) {
	e := mustNew(b)
	for _, eager := range []bool{true, false} {
		for _, speed := range []float64{1, 0.25, 0.5, 2, 4} {
			b.Run(fmt.Sprintf("eager=%v/speed=%g", eager, speed), func(b *testing.B) {
				e.SetEagerFirstChunk(eager)
				defer e.SetEagerFirstChunk(false)
				firstChunkAt(b, e, speed)
			})
		}
	}
}

func BenchmarkPoolInProcess(b *testing.B) {
	e := mustNew(b)
	p, err := engine.NewPool(engine.PoolOptions{Engine: e, Workers: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	firstChunk(b, p)
}

func BenchmarkPoolSubprocess(b *testing.B) {
	e := mustNew(b)
	p, err := engine.NewPool(engine.PoolOptions{Engine: e, Workers: 1, NewWorker: subprocessWorker, WorkerDepth: worker.Depth})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	firstChunk(b, p)
}

// BenchmarkPoolThroughput: 16 concurrent multi-sentence requests through 1
// and through 2 subprocess workers, in alternating rounds so that both
// see the same machine (a shared one drifts by tens of percent within a
// minute): audio-seconds per second of each, and their ratio.
func BenchmarkPoolThroughput(b *testing.B) {
	text := ""
	for i := range 6 {
		text += fmt.Sprintf("This is sentence number %d of a throughput test. ", i)
	}
	e := mustNew(b)
	pools := make([]*engine.Pool, 2)
	for k, workers := range []int{1, 2} {
		p, err := engine.NewPool(engine.PoolOptions{Engine: e, Workers: workers, NewWorker: subprocessWorker,
			WorkerDepth: worker.Depth, RecycleSamples: true}) // as the server runs it
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		pools[k] = p
	}
	// round runs the 16 requests on p and returns the samples and the time.
	// (Enough that the idle tail of a round, its last sentence or two on
	// one worker, is a small part of it.)
	round := func(p *engine.Pool) (int, time.Duration) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		samples := 0
		start := time.Now()
		for range 16 {
			wg.Go(func() {
				n := 0
				err := p.Synthesize(context.Background(), engine.Request{Text: text}, func(c engine.Chunk) error {
					n += len(c.Samples)
					return nil
				})
				if err != nil {
					b.Error(err)
				}
				mu.Lock()
				samples += n
				mu.Unlock()
			})
		}
		wg.Wait()
		return samples, time.Since(start)
	}
	round(pools[0]) // warm both: first renders fill caches and pages
	round(pools[1])
	var samples [2]int
	var wall, parent [2]time.Duration
	var ratios []float64 // per pair of rounds
	b.ResetTimer()
	for range b.N {
		var rates [2]float64
		for k, p := range pools {
			cpu := processCPU()
			n, d := round(p)
			parent[k] += processCPU() - cpu
			samples[k] += n
			wall[k] += d
			rates[k] = float64(n) / d.Seconds()
		}
		ratios = append(ratios, rates[1]/rates[0])
	}
	audio := func(k int) float64 { return float64(samples[k]) / float64(e.NativeRate()) }
	rate := func(k int) float64 { return audio(k) / wall[k].Seconds() }
	b.ReportMetric(rate(0), "audio-s/s-1-worker")
	b.ReportMetric(rate(1), "audio-s/s-2-workers")
	// The median of the pairs' ratios: a pair sees one machine state, and
	// the median leaves out the pairs a burst of host load hit on one side.
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "x-2-over-1")
	// This process's CPU per second of audio: what the gateway spends
	// receiving and delivering it, which with two workers competes with
	// them for the two cores. Process CPU time, so the host's steal does
	// not inflate it.
	b.ReportMetric(float64(parent[1].Milliseconds())/audio(1), "parent-cpu-ms/audio-s")
}

// processCPU is this process's user and system CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
