package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"
)

// Options configure one bench invocation; Main fills them from flags.
type Options struct {
	BaseURL     string
	APIKey      string
	Voice       string // id or alias; "" = first ready voice
	Text        string
	Scenarios   []string // speak, sse, ws, compat
	Format      string   // "" = the scenario default (s16le; compat pcm)
	SampleRate  int
	Concurrency int
	Rate        float64 // > 0: open loop
	Duration    time.Duration
	Requests    int
	Warmup      time.Duration
	Timeout     time.Duration // per operation
	MaxTime     time.Duration // cap when only Requests bounds a level
	Contexts    int           // ws contexts per session
	TextMode    string        // ws: sentence | stream
	TPS         float64       // ws stream mode: words per second
	Sweep       []float64     // load levels (concurrency, or rate in open loop)
	ServerPID   int
	Progress    io.Writer // live progress line; nil = none
	// Pace (closed loop): a worker starts its next operation no sooner than
	// the previous one's start + its audio duration, so N workers are N
	// realtime listeners rather than N back-to-back requesters; against an
	// engine faster than real time this is what "N concurrent realtime
	// streams" means.
	Pace bool
	// PacedDuration (baseline): how long a paced level is measured. Paced
	// listeners start one operation per audio duration each, so a level
	// needs seconds, not the fraction of one an unpaced level does, to
	// hold a few hundred first bytes.
	PacedDuration time.Duration

	// Target is the server's API: "voicesvc" (default) or "openai", any
	// OpenAI-compatible speech server at BaseURL (its /audio/speech), with
	// Voice its voice name, Model the model sent and APIKey optional. Via
	// is a second such base URL (ViaKey, ViaPID) measured in turn with
	// BaseURL, Rounds times per level.
	Target   string
	Model    string
	Via      string
	ViaKey   string
	ViaVoice string // default: Voice
	ViaPID   int
	Rounds   int
	// Native (targets cartesia, deepgram): a voicesvc base URL whose native
	// WebSocket is measured in turn with the Cartesia socket at BaseURL.
	Native string

	setFlags map[string]bool // flags given on the command line (Main only)
	baseline bool            // --baseline (Main only)
	capacity []Probe         // --capacity (suite only)
	// --overload N, --overload-factors, --overload-duration (Main only).
	overload         int
	overloadFactors  []float64
	overloadDuration time.Duration
}

// Scenarios the bench knows, in report order.
var Scenarios = []string{"speak", "sse", "ws", "compat"}

// DefaultText is two sentences, about two seconds of speech: several chunks
// and a sentence boundary, yet short enough that a closed-loop worker against
// a real-time paced engine completes several operations per level. An
// operation longer than the measured window is never measured.
const DefaultText = "Thanks for calling. How can I help you today?"

func (o *Options) defaults() error {
	if o.BaseURL == "" {
		o.BaseURL = "http://127.0.0.1:8080"
	}
	o.BaseURL = strings.TrimRight(o.BaseURL, "/")
	if !strings.HasPrefix(o.BaseURL, "http://") && !strings.HasPrefix(o.BaseURL, "https://") {
		return fmt.Errorf("base URL %q must start with http:// or https://", o.BaseURL)
	}
	if o.Text == "" {
		o.Text = DefaultText
	}
	switch o.Target {
	case "", "voicesvc":
		o.Target = "voicesvc"
		if o.Via != "" {
			return fmt.Errorf("--via applies to --target openai")
		}
	case "openai":
		o.Scenarios = []string{scenarioOpenAI}
		if o.Model == "" {
			o.Model = "tts-1"
		}
		if o.Via != "" && !strings.HasPrefix(o.Via, "http://") && !strings.HasPrefix(o.Via, "https://") {
			return fmt.Errorf("--via %q must start with http:// or https://", o.Via)
		}
	case "cartesia", "elevenlabs", "deepgram":
		// The dialect's socket is the target's one scenario, named after it.
		o.Scenarios = []string{o.Target}
		if o.Via != "" {
			return fmt.Errorf("--via applies to --target openai")
		}
		o.Native = strings.TrimRight(o.Native, "/")
		if o.Native != "" && !strings.HasPrefix(o.Native, "http://") && !strings.HasPrefix(o.Native, "https://") {
			return fmt.Errorf("--native %q must start with http:// or https://", o.Native)
		}
	default:
		return fmt.Errorf("--target %q: want voicesvc, openai, cartesia, deepgram or elevenlabs", o.Target)
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = []string{"sse"}
	}
	for _, s := range o.Scenarios {
		if o.Target == "voicesvc" && !contains(Scenarios, s) {
			return fmt.Errorf("unknown scenario %q (want %s)", s, strings.Join(Scenarios, ", "))
		}
	}
	o.SampleRate = orInt(o.SampleRate, 24000)
	if o.Concurrency == 0 && o.Rate > 0 {
		// Open loop: concurrency only caps operations in flight.
		o.Concurrency = 256
	}
	o.Concurrency = orInt(o.Concurrency, 1)
	o.Contexts = min(orInt(o.Contexts, 4), 4)
	if o.Duration <= 0 && o.Requests <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxTime <= 0 {
		o.MaxTime = 5 * time.Minute
	}
	if o.TextMode == "" {
		o.TextMode = "sentence"
	}
	if o.TextMode != "sentence" && o.TextMode != "stream" {
		return fmt.Errorf("ws text mode %q: want sentence or stream", o.TextMode)
	}
	if o.TPS <= 0 {
		o.TPS = 20
	}
	if o.Concurrency < 1 || o.Rate < 0 || o.Warmup < 0 {
		return fmt.Errorf("concurrency must be >= 1, rate and warmup >= 0")
	}
	return nil
}

func orInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Execute runs every scenario at every load level and returns the run; it
// does not write files (see WriteOutputs).
func Execute(ctx context.Context, o Options) (*Run, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	switch o.Target {
	case "openai":
		return executeOpenAI(ctx, o)
	case "cartesia":
		return executeCartesia(ctx, o)
	case "deepgram":
		return executeDeepgram(ctx, o)
	case "elevenlabs":
		return executeElevenLabs(ctx, o)
	}
	levels := o.Sweep
	if len(levels) == 0 {
		levels = []float64{float64(o.Concurrency)}
		if o.Rate > 0 {
			levels = []float64{o.Rate}
		}
	}
	maxConns := o.Concurrency
	for _, l := range levels {
		maxConns = max(maxConns, int(l))
	}
	t := &target{
		base: o.BaseURL, apiRoot: o.BaseURL + apiPath, key: o.APIKey,
		client: newHTTPClient(maxConns), text: o.Text, sampleRate: o.SampleRate,
	}
	defer t.client.CloseIdleConnections()
	run := &Run{
		Tool: "voicesvc-bench", Version: 1, StartedAt: time.Now().UTC(), BaseURL: o.BaseURL,
		Host: HostInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	run.Engine = t.engineName(ctx)
	if err := t.resolveVoice(ctx, o.Voice); err != nil {
		return nil, err
	}
	run.Voice = t.voiceRef
	usage := t.pickUsageSource(ctx, o.ServerPID)
	for _, name := range o.Scenarios {
		for _, level := range levels {
			if ctx.Err() != nil {
				return run, ctx.Err()
			}
			res, err := runLevel(ctx, o, t, usage, name, level)
			if err != nil {
				return run, err
			}
			run.Results = append(run.Results, res)
		}
	}
	return run, nil
}

// runLevel runs one scenario at one load level.
func runLevel(ctx context.Context, o Options, base *target, usage usageSource, name string, level float64) (*Result, error) {
	t := *base
	t.format = scenarioFormat(name, o.Format)
	spec := loadSpec{
		concurrency: o.Concurrency, rate: o.Rate, duration: o.Duration, requests: o.Requests,
		warmup: o.Warmup, timeout: o.Timeout, maxTime: o.MaxTime, pace: o.Pace && o.Rate <= 0,
	}
	if o.Rate > 0 {
		spec.rate = level
	} else {
		spec.concurrency = max(1, int(level))
	}
	res := &Result{
		Scenario: name, Mode: "closed", Concurrency: spec.concurrency, Format: t.format,
		TextChars: len([]rune(o.Text)), Warmup: o.Warmup.Seconds(),
	}
	if spec.rate > 0 {
		res.Mode, res.Rate = "open", spec.rate
	}
	res.Paced = spec.pace
	var sc scenario
	switch name {
	case "speak":
		sc = &speakScenario{t: &t}
	case "sse":
		sc = &sseScenario{t: &t}
	case "compat":
		sc = &compatScenario{t: &t}
	case "ws":
		ws := newWSScenario(&t, o.Contexts, o.TextMode == "stream", o.TPS)
		sc = ws
		res.Contexts = ws.contexts
		res.Sessions = (spec.concurrency + ws.contexts - 1) / ws.contexts
		res.TextMode = o.TextMode
		if ws.stream {
			res.TPS = o.TPS
		}
	}
	if err := sc.open(ctx, spec.concurrency); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	mon := startUsage(ctx, usage, time.Now().Add(spec.warmup))
	rec := drive(ctx, sc, spec, fmt.Sprintf("[%s %s]", name, res.LoadLabel()), o.Progress)
	res.Server = mon.finish()
	sc.close()
	rec.fill(res)
	if res.Operations == 0 && res.ErrorCount == 0 {
		// Closed-loop workers still busy with warm-up operations when the
		// window closed: operations outlast warm-up + duration.
		res.Note = "no operation started in the measured window; lengthen --duration (operations take longer than warm-up + duration)"
	}
	if ws, ok := sc.(*wsScenario); ok {
		ws.strayMu.Lock()
		for k, v := range ws.stray {
			res.Errors[k] += v
			res.ErrorCount += v
		}
		ws.strayMu.Unlock()
	}
	return res, nil
}
