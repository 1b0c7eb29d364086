package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Main is `voicesvc bench`: it parses args (without the program and
// subcommand names), runs, writes the outputs and returns the exit code:
// 0 done (even with request errors: they are results), 1 failed, 2 usage.
//
// `suite [flags]` and `compare A B` are accepted as words for --suite and
// --compare A B, `baseline [flags]` for --baseline; `summary DIR` tabulates the runs in DIR/*/results.json (one
// per engine, as make bench writes them) against the targets.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "suite":
			args = append([]string{"--suite"}, args[1:]...)
		case "compare":
			args = append([]string{"--compare"}, args[1:]...)
		case "baseline":
			args = append([]string{"--baseline"}, args[1:]...)
		case "summary":
			return summaryMain(args[1:], stdout, stderr)
		case "bare":
			return bareMain(args[1:], os.Stdin, stdout, stderr)
		case "controlplane":
			return controlPlaneMain(ctx, args[1:], stdout, stderr)
		}
	}
	if a, b, ok := compareArgs(args); ok {
		ra, err := ReadRun(a)
		if err == nil {
			var rb *Run
			if rb, err = ReadRun(b); err == nil {
				err = WriteCompare(stdout, ra, rb)
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	o, out, suite, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if suite {
		so := SuiteOptions{
			BaseURL: o.BaseURL, APIKey: o.APIKey, Voice: o.Voice, Out: out,
			ServerPID: o.ServerPID, Progress: o.Progress, Capacity: o.capacity,
			Overload: o.overload, OverloadFactors: o.overloadFactors, OverloadDuration: o.overloadDuration,
		}
		// Only what was given on the command line overrides the suite's
		// fixed values.
		if o.setFlags["duration"] {
			so.Duration = o.Duration
		}
		if o.setFlags["warmup"] {
			so.Warmup = o.Warmup
			if so.Warmup == 0 {
				so.Warmup = -1
			}
		}
		for _, l := range o.Sweep {
			so.Levels = append(so.Levels, int(l))
		}
		_, err := Suite(ctx, so, stdout)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	var run *Run
	switch {
	case o.baseline:
		baselineDefaults(&o)
		run, err = Baseline(ctx, o)
	case o.overload > 0:
		run, err = OverloadProbe(ctx, o, o.overload, o.overloadFactors, o.overloadDuration)
	default:
		run, err = Execute(ctx, o)
	}
	if run == nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	run.Args = append([]string{"voicesvc", "bench"}, redact(args)...)
	if werr := WriteOutputs(out, run, stdout); werr != nil {
		fmt.Fprintln(stderr, "bench:", werr)
		return 1
	}
	fmt.Fprintf(stderr, "bench: wrote %s\n", out)
	if err != nil {
		// Interrupted: what ran is written, but the run is incomplete.
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// compareArgs recognises `--compare A B`, which takes two values.
func compareArgs(args []string) (string, string, bool) {
	for i, a := range args {
		if a == "--compare" || a == "-compare" {
			if i+2 < len(args) {
				return args[i+1], args[i+2], true
			}
		}
	}
	return "", "", false
}

// DefaultOut is the output directory of a run started at t.
func DefaultOut(t time.Time) string {
	return filepath.Join("bench", "results", t.UTC().Format("20060102-150405"))
}

func parseFlags(args []string, stderr io.Writer) (Options, string, bool, error) {
	var o Options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.BaseURL, "base", envOr("VOICESVC_BENCH_BASE", "http://127.0.0.1:8080"), "server base URL (env VOICESVC_BENCH_BASE); only this host is contacted")
	fs.StringVar(&o.APIKey, "key", os.Getenv("VOICESVC_API_KEY"), "API key with scope tts and voices:read (env VOICESVC_API_KEY)")
	scn := fs.String("scenario", "sse", "comma list of speak, sse, ws, compat")
	fs.StringVar(&o.Voice, "voice", "", "voice id or alias (default: first ready voice of GET /voices)")
	fs.StringVar(&o.Text, "text", DefaultText, "text of every request")
	fs.StringVar(&o.Format, "format", "", "output format (default s16le; compat pcm; compat also wav, mp3)")
	fs.IntVar(&o.SampleRate, "sample-rate", 24000, "sample rate for speak, sse, ws")
	fs.IntVar(&o.Concurrency, "concurrency", 0, "closed loop: concurrent operations (ws: contexts); open loop: cap in flight (default 1; 256 with --rate)")
	fs.Float64Var(&o.Rate, "rate", 0, "open loop: arrivals per second")
	fs.DurationVar(&o.Duration, "duration", 0, "measured time per level (default 10s unless --requests)")
	fs.IntVar(&o.Requests, "requests", 0, "measured operations per level")
	fs.DurationVar(&o.Warmup, "warmup", 2*time.Second, "warm-up per level, excluded from figures")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "per-operation timeout")
	fs.DurationVar(&o.MaxTime, "max-time", 5*time.Minute, "cap per level when only --requests bounds it")
	fs.IntVar(&o.Contexts, "contexts", 4, "ws: contexts per session (at most 4)")
	fs.StringVar(&o.TextMode, "ws-text", "sentence", "ws: sentence (whole text in task_start) or stream (word by word)")
	fs.BoolVar(&o.Pace, "pace", false, "closed loop: start a worker's next operation only once the previous audio has played (start + audio duration): N realtime listeners")
	fs.Float64Var(&o.TPS, "tps", 20, "ws stream: words per second, like a language model's tokens")
	sweep := fs.String("sweep", "", "comma list of load levels, e.g. 1,16,64,256 (rates with --rate)")
	fs.IntVar(&o.ServerPID, "server-pid", 0, "server pid for CPU/RSS from /proc (default: found by port on loopback, else /metrics)")
	out := fs.String("out", "", "output directory (default bench/results/<timestamp>)")
	quiet := fs.Bool("quiet", false, "no live progress line")
	suite := fs.Bool("suite", false, "run the fixed suite (see Suite); uses --base, --key, --voice, --out, --server-pid, and --duration, --warmup, --sweep, --capacity when given")
	fs.StringVar(&o.Target, "target", "voicesvc", "voicesvc, or openai: any OpenAI-compatible speech server at --base (e.g. http://127.0.0.1:8880/v1; requests go to {base}/audio/speech, streamed pcm), --voice its voice name, --key optional; or cartesia: Cartesia's realtime socket at the Cartesia base URL --base (https://api.cartesia.ai, or a voicesvc's .../compat/cartesia; {base}/tts/websocket), --voice a voice id, --key sent as X-API-Key; or deepgram: Deepgram's speak socket at the Deepgram base URL --base (https://api.deepgram.com, or a voicesvc's .../compat/deepgram; {base}/v1/speak), --voice the model, --key sent as Authorization: Token; or elevenlabs: any ElevenLabs API at --base (e.g. https://api.elevenlabs.io or a voicesvc's .../compat/elevenlabs), one stream-input socket an utterance, --voice its voice id, --key its xi-api-key")
	fs.StringVar(&o.Native, "native", "", "cartesia, deepgram and elevenlabs: a voicesvc base URL (the server behind --base) whose native WebSocket is measured in turn with --base, round by round; the report adds what the dialect adds to the time to first audio byte")
	fs.StringVar(&o.Model, "model", "", "openai: the model sent (default tts-1)")
	fs.StringVar(&o.Via, "via", "", "openai: a second OpenAI-compatible base URL (e.g. a voicesvc's .../compat in front of --base), measured in turn with --base; the report adds what it adds to the time to first audio byte")
	fs.StringVar(&o.ViaKey, "via-key", "", "openai: the key for --via")
	fs.StringVar(&o.ViaVoice, "via-voice", "", "openai: the voice name on --via (default --voice)")
	fs.IntVar(&o.ViaPID, "via-pid", 0, "openai: the --via server's pid for its CPU (default: found by port on loopback)")
	fs.IntVar(&o.Rounds, "rounds", 0, "openai and baseline: measured rounds per level, each side in turn (default 1; 3 with --via or --baseline)")
	fs.BoolVar(&o.baseline, "baseline", false, "measure a bare fasthttp server (a process of its own) answering voicesvc's recorded bytes and voicesvc in turn (see bench/README.md); uses --sweep (default 1,64; levels over 1 are paced listeners unless --pace is given), --rounds (default 3), --duration, --paced-duration, --warmup, --requests")
	fs.DurationVar(&o.PacedDuration, "paced-duration", 0, "baseline: measured time of a paced level (default 3s)")
	capacity := fs.String("capacity", "", "suite: capacity probes after the fixed levels, e.g. ws=1000,sse=500")
	fs.IntVar(&o.overload, "overload", 0, "the overload probe: N is how many realtime ws streams the server holds; runs paced ws (4 contexts a session, the two-sentence default text) at --overload-factors times N and reports the admitted streams' TTFB and gaps, the refusals (503/task_failed upstream_busy, counted apart, Retry-After honoured) and how fast they came, and audio s/s; with --suite, after its levels")
	factors := fs.String("overload-factors", "1,1.5,3", "overload probe: multiples of --overload to run")
	fs.DurationVar(&o.overloadDuration, "overload-duration", defaultOverloadDuration, "overload probe: measured time per level (after one utterance of ramp)")
	if err := fs.Parse(args); err != nil {
		return o, "", false, err
	}
	o.setFlags = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.setFlags[f.Name] = true })
	if *capacity != "" {
		if !*suite {
			return o, "", false, fmt.Errorf("--capacity applies to the suite only")
		}
		p, err := ParseProbes(*capacity)
		if err != nil {
			return o, "", false, err
		}
		o.capacity = p
	}
	if fs.NArg() > 0 {
		return o, "", false, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, s := range splitList(*factors) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 || v > 10 {
			return o, "", false, fmt.Errorf("--overload-factors: bad factor %q (want 0-10)", s)
		}
		o.overloadFactors = append(o.overloadFactors, v)
	}
	switch {
	case o.overload < 0 || o.overload > 20000:
		return o, "", false, fmt.Errorf("--overload %d: want 1-20000 streams", o.overload)
	case o.overload > 0 && (o.baseline || o.Target != "voicesvc" && o.Target != ""):
		return o, "", false, fmt.Errorf("--overload applies to --target voicesvc, alone or with --suite")
	}
	o.Scenarios = splitList(*scn)
	if o.Rounds == 0 && (o.Via != "" || o.Native != "" || o.baseline) {
		o.Rounds = 3
	}
	for _, s := range splitList(*sweep) {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			return o, "", false, fmt.Errorf("--sweep: bad level %q", s)
		}
		o.Sweep = append(o.Sweep, v)
	}
	if o.APIKey == "" && o.Target != "openai" {
		return o, "", false, fmt.Errorf("an API key is required (--key or VOICESVC_API_KEY)")
	}
	if (o.Target == "openai" || o.Target == "cartesia" || o.Target == "deepgram" || o.Target == "elevenlabs") && (*suite || o.baseline) {
		return o, "", false, fmt.Errorf("--suite and --baseline apply to --target voicesvc")
	}
	if !*quiet {
		o.Progress = stderr
	}
	if *out == "" {
		*out = DefaultOut(time.Now())
	}
	return o, *out, *suite, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// redact hides the API key in the command line recorded in the report.
func redact(args []string) []string {
	out := append([]string(nil), args...)
	for i, a := range out {
		switch {
		case (a == "--key" || a == "-key") && i+1 < len(out):
			out[i+1] = "***"
		case strings.HasPrefix(a, "--key=") || strings.HasPrefix(a, "-key="):
			out[i] = a[:strings.IndexByte(a, '=')+1] + "***"
		}
	}
	return out
}

// baselineDefaults: short levels and the suite's one-second text unless
// given. A first byte takes well under a millisecond, so one second at one
// stream holds about a thousand of them; 48 levels of 1.3 s keep the
// baseline near a minute.
func baselineDefaults(o *Options) {
	if !o.setFlags["duration"] && !o.setFlags["requests"] {
		o.Duration = time.Second
	}
	if !o.setFlags["warmup"] {
		o.Warmup = 300 * time.Millisecond
	}
	if !o.setFlags["text"] {
		o.Text = SuiteText
	}
	if !o.setFlags["paced-duration"] {
		o.PacedDuration = 3 * time.Second
	}
}
