package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// SuiteOptions configure Suite; zero values take the documented defaults.
type SuiteOptions struct {
	BaseURL   string
	APIKey    string
	Voice     string
	Out       string // default bench/results/suite-<timestamp>
	ServerPID int
	Levels    []int         // default 1, 16, 64, 256
	Duration  time.Duration // measured per level, default 8s
	Warmup    time.Duration // per level, default 1s; negative = none
	// Capacity probes run after the fixed levels, each one scenario at one
	// concurrency with the same duration and warm-up, and are appended to
	// the same run: the report's Capacity section then covers them too.
	Capacity []Probe
	// Overload, when > 0, is a capacity figure in realtime ws streams: the
	// overload probe runs last, paced ws at OverloadFactors times it (1,
	// 1.5 and 3), each OverloadDuration measured (default 6 s), with the
	// two-sentence DefaultText so that a context has a sentence after its
	// first. What it shows: the streams admitted stay on time, the excess
	// is refused at once, and throughput holds at capacity (OverloadProbe).
	Overload         int
	OverloadFactors  []float64
	OverloadDuration time.Duration
	Progress         io.Writer
}

// Probe is one capacity measurement of a suite: a scenario at a concurrency
// (ws: contexts, 4 per session).
type Probe struct {
	Scenario    string
	Concurrency int
	Pace        bool // realtime listeners (Options.Pace)
}

// ParseProbes reads "ws=1000,sse=500" (also "ws:1000") into probes; a
// "/rt" suffix (ws=500/rt) paces the probe like realtime listeners.
func ParseProbes(s string) ([]Probe, error) {
	var out []Probe
	for _, p := range splitList(s) {
		i := strings.IndexAny(p, "=:")
		if i < 0 {
			return nil, fmt.Errorf("capacity probe %q: want scenario=concurrency", p)
		}
		v, pace := strings.CutSuffix(p[i+1:], "/rt")
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || !contains(Scenarios, p[:i]) {
			return nil, fmt.Errorf("capacity probe %q: want scenario=concurrency with a known scenario", p)
		}
		out = append(out, Probe{Scenario: p[:i], Concurrency: n, Pace: pace})
	}
	return out, nil
}

// Overload probe defaults (SuiteOptions.Overload).
var defaultOverloadFactors = []float64{1, 1.5, 3}

const defaultOverloadDuration = 6 * time.Second

// OverloadProbe runs realtime ws streams (paced listeners, o's text and
// session settings) at factors (default 1, 1.5 and 3) times capacity, a
// figure in streams about what the server holds (the 1x level shows what
// it really carries, which the others are held to), each level duration
// measured (default 6 s). It reports, for the
// streams admitted, their TTFB and gaps; the refusals (503 upstream_busy,
// task_failed upstream_busy), counted apart and answered by waiting out
// their Retry-After; how fast they came; and the audio per second. Each
// level is bounded like any: a fixed number of listeners, the measured
// window plus one operation timeout, the bench's sample reservoirs, and
// only o's base URL is contacted.
func OverloadProbe(ctx context.Context, o Options, capacity int, factors []float64, duration time.Duration) (*Run, error) {
	if len(factors) == 0 {
		factors = defaultOverloadFactors
	}
	if duration <= 0 {
		duration = defaultOverloadDuration
	}
	po := o
	po.Scenarios, po.Pace, po.Duration, po.Rate, po.Requests = []string{"ws"}, true, duration, 0, 0
	var run *Run
	for _, f := range factors {
		po.Sweep = []float64{float64(max(1, int(float64(capacity)*f+0.5)))}
		pr, err := Execute(ctx, po)
		if pr != nil {
			for _, r := range pr.Results {
				r.Overload = &Overload{Capacity: capacity, Factor: f}
			}
			if run == nil {
				run = pr
			} else {
				run.Results = append(run.Results, pr.Results...)
			}
		}
		if err != nil {
			return run, err
		}
	}
	return run, nil
}

// SuiteText is about one second of speech: under a real-time paced engine an
// operation lasts as long as its audio, so a short utterance gives each level
// many TTFB samples within the suite's time budget.
const SuiteText = "Hello, how can I help?"

// Suite is the fixed benchmark `make bench` runs: for each transport (speak,
// sse, ws with whole sentences, compat pcm) at concurrency 1, 16, 64 and 256,
// closed loop, 1 s warm-up and 8 s measured per level, s16le at 24 kHz, the
// one-second SuiteText, operation timeout 8 s. 16 levels of about 10-11 s
// each (17 s at worst, when every operation times out) keep one engine near 3
// minutes and under 5. ws concurrency counts contexts, 4 per session (64
// sessions at 256). The server's workspace must allow it: billing off,
// concurrency >= 256, rps 0, sessions >= 64 (`voicesvc admin workspace
// update`). make bench (scripts/bench.sh) runs it per engine with 4 s
// measured per level and capacity probes, to fit both engines in 5 minutes.
//
// It writes results.json, report.md and plots into Out, prints the table to
// stdout and returns the run.
func Suite(ctx context.Context, so SuiteOptions, stdout io.Writer) (*Run, error) {
	if len(so.Levels) == 0 {
		so.Levels = []int{1, 16, 64, 256}
	}
	if so.Duration <= 0 {
		so.Duration = 8 * time.Second
	}
	switch {
	case so.Warmup == 0:
		so.Warmup = time.Second
	case so.Warmup < 0:
		so.Warmup = 0
	}
	if so.Out == "" {
		so.Out = filepath.Join("bench", "results", "suite-"+time.Now().UTC().Format("20060102-150405"))
	}
	o := Options{
		BaseURL: so.BaseURL, APIKey: so.APIKey, Voice: so.Voice, Text: SuiteText,
		Scenarios: Scenarios, SampleRate: 24000, Duration: so.Duration, Warmup: so.Warmup,
		Timeout: 8 * time.Second, Contexts: 4, TextMode: "sentence",
		ServerPID: so.ServerPID, Progress: so.Progress,
	}
	for _, l := range so.Levels {
		o.Sweep = append(o.Sweep, float64(l))
	}
	run, err := Execute(ctx, o)
	if run == nil {
		return nil, err
	}
	for _, p := range so.Capacity {
		if err != nil {
			break
		}
		po := o
		po.Scenarios, po.Sweep, po.Pace = []string{p.Scenario}, []float64{float64(p.Concurrency)}, p.Pace
		var pr *Run
		if pr, err = Execute(ctx, po); pr != nil {
			run.Results = append(run.Results, pr.Results...)
		}
	}
	if so.Overload > 0 && err == nil {
		// The two-sentence text: a context has a sentence after its first,
		// which must stay on time however many are refused.
		po := o
		po.Text = DefaultText
		var or *Run
		or, err = OverloadProbe(ctx, po, so.Overload, so.OverloadFactors, so.OverloadDuration)
		if or != nil {
			run.Results = append(run.Results, or.Results...)
		}
	}
	run.Args = []string{"voicesvc", "bench", "--suite"}
	if werr := WriteOutputs(so.Out, run, stdout); werr != nil {
		return run, werr
	}
	if err != nil {
		return run, fmt.Errorf("suite incomplete: %w", err)
	}
	return run, nil
}
