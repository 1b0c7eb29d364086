package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The control-plane scenario (issue 32; `voicesvc bench controlplane`,
// `make bench`): what limits and billing cost per request, store by store.
// For each case (store and billing mode) it starts its own server on
// loopback (reference engine, unpaced), makes an enterprise workspace with
// room for any load (concurrency and sessions 100,000, rps 0 or one never
// reached, an allowance that never runs out) and a key, and runs speak
// "Hi." closed loop at each level. Cases alternate within a round, rounds repeat, and the medians are
// reported, with the store round trips per admitted request counted from
// voicesvc_store_duration_seconds.

// CPCase is one store and billing mode, and the workspace's rps limit (0:
// none; a high one exercises the rps path without refusing).
type CPCase struct {
	Name, Store, Billing string // Store: sqlite | postgres
	RPS                  int
}

// CPOptions configure the scenario.
type CPOptions struct {
	Bin      string // the voicesvc binary
	PG       string // a Postgres URL; "" skips the Postgres cases
	Cases    []CPCase
	Levels   []int
	Rounds   int
	Duration time.Duration
	Warmup   time.Duration
	Args     []string // extra serve flags
	Progress io.Writer
}

// CPResult is one case at one level: the median over the rounds.
type CPResult struct {
	Case        string  `json:"case"`
	Concurrency int     `json:"concurrency"`
	RPS         float64 `json:"ops_per_second"`
	TTFBp50     float64 `json:"ttfb_p50_ms"`
	RoundTrips  float64 `json:"store_round_trips_per_request"`
	// CPUus is the server's CPU time per admitted request, in µs: what
	// limits and billing cost, read off /proc where req/s on a shared
	// machine moves with its neighbours.
	CPUus  float64   `json:"server_cpu_us_per_request"`
	Rounds []float64 `json:"rounds_ops_per_second"`
}

// DefaultCPCases: SQLite off and enforce, Postgres enforce, and Postgres
// off for the record; then both enforced with an rps limit of 100,000
// (never reached), whose requests the rps window's leases count.
var DefaultCPCases = []CPCase{{"sqlite-off", "sqlite", "off", 0}, {"sqlite-enforce", "sqlite", "enforce", 0},
	{"postgres-enforce", "postgres", "enforce", 0}, {"postgres-off", "postgres", "off", 0},
	{"sqlite-enforce-rps", "sqlite", "enforce", 100_000}, {"postgres-enforce-rps", "postgres", "enforce", 100_000}}

// cpFile is the control plane's results in its --out directory: not
// results.json, which names a Run (bench summary reads every
// DIR/*/results.json as one), but read by bench summary too.
const cpFile = "controlplane.json"

// WriteControlPlaneJSON writes res to dir (--out), made if need be.
func WriteControlPlaneJSON(dir string, res []CPResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, cpFile), append(b, '\n'), 0o644)
}

// ReadControlPlane reads the results written to dir (--out).
func ReadControlPlane(dir string) ([]CPResult, error) {
	b, err := os.ReadFile(filepath.Join(dir, cpFile))
	if err != nil {
		return nil, err
	}
	var res []CPResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, cpFile), err)
	}
	return res, nil
}

// selectCPCases picks DefaultCPCases named in names (comma separated;
// empty: all), in their order, leaving out the Postgres ones without pg.
func selectCPCases(names string, pg bool) ([]CPCase, error) {
	want := map[string]bool{}
	for _, c := range splitList(names) {
		want[c] = true
	}
	filtered := len(want) > 0
	var cases []CPCase
	for _, c := range DefaultCPCases {
		if c.Store == "postgres" && !pg || filtered && !want[c.Name] {
			continue
		}
		delete(want, c.Name) // found: what stays in want names no case
		cases = append(cases, c)
	}
	for c := range want {
		return nil, fmt.Errorf("no case %q (or it needs --pg)", c)
	}
	return cases, nil
}

// absBinary is bin as an absolute path: the servers run in directories of
// their own, where a relative --bin (make bench passes bin/voicesvc) names
// nothing. A bare name is looked up in PATH.
func absBinary(bin string) (string, error) {
	if !strings.ContainsRune(bin, filepath.Separator) {
		p, err := exec.LookPath(bin)
		if err != nil {
			return "", err
		}
		bin = p
	}
	return filepath.Abs(bin)
}

func controlPlaneMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("voicesvc bench controlplane", flag.ContinueOnError)
	fs.SetOutput(stderr)
	self, _ := os.Executable()
	o := CPOptions{Progress: stderr}
	var levels, out, extra, cases string
	fs.StringVar(&o.Bin, "bin", self, "the voicesvc binary the servers run")
	fs.StringVar(&o.PG, "pg", os.Getenv("VOICESVC_BENCH_PG"), "Postgres URL for the Postgres cases (empty: skipped); env VOICESVC_BENCH_PG")
	fs.StringVar(&levels, "levels", "16,64", "closed-loop concurrency levels")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; the cases alternate within each")
	fs.DurationVar(&o.Duration, "duration", 3*time.Second, "measured time per case and level")
	fs.DurationVar(&o.Warmup, "warmup", time.Second, "warm-up per case and level")
	fs.StringVar(&out, "out", "", "write "+cpFile+" here too")
	fs.StringVar(&cases, "cases", "", "the cases to run, comma separated (default: all; the Postgres ones need --pg)")
	fs.StringVar(&extra, "serve-args", "", "extra serve flags, space separated (e.g. --leases=false)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for _, l := range splitList(levels) {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 {
			fmt.Fprintf(stderr, "bench: --levels %q\n", levels)
			return 2
		}
		o.Levels = append(o.Levels, n)
	}
	o.Args = strings.Fields(extra)
	var err error
	if o.Cases, err = selectCPCases(cases, o.PG != ""); err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	if o.Bin, err = absBinary(o.Bin); err != nil {
		fmt.Fprintln(stderr, "bench: --bin:", err)
		return 2
	}
	res, err := ControlPlane(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	WriteControlPlane(stdout, res)
	if out != "" {
		if err := WriteControlPlaneJSON(out, res); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	return 0
}

// ControlPlane runs every case at every level, Rounds times, alternating.
func ControlPlane(ctx context.Context, o CPOptions) ([]CPResult, error) {
	type key struct {
		c string
		l int
	}
	samples := map[key][][4]float64{}
	for round := 1; round <= o.Rounds; round++ {
		for _, c := range o.Cases {
			srv, err := startCPServer(ctx, o, c)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c.Name, err)
			}
			for _, level := range o.Levels {
				rps, ttfb, rt, cpu, err := srv.measure(ctx, o, level)
				if err != nil {
					srv.stop()
					return nil, fmt.Errorf("%s c=%d: %w", c.Name, level, err)
				}
				if o.Progress != nil {
					fmt.Fprintf(o.Progress, "round %d %-17s c=%-3d %8.0f req/s  TTFB p50 %.2f ms  %.4f store calls/request  %.0f µs CPU/request\n",
						round, c.Name, level, rps, ttfb, rt, cpu)
				}
				k := key{c.Name, level}
				samples[k] = append(samples[k], [4]float64{rps, ttfb, rt, cpu})
			}
			srv.stop()
		}
	}
	var res []CPResult
	for _, c := range o.Cases {
		for _, l := range o.Levels {
			s := samples[key{c.Name, l}]
			r := CPResult{Case: c.Name, Concurrency: l}
			r.RPS, r.TTFBp50, r.RoundTrips, r.CPUus = median(s, 0), median(s, 1), median(s, 2), median(s, 3)
			for _, x := range s {
				r.Rounds = append(r.Rounds, x[0])
			}
			res = append(res, r)
		}
	}
	return res, nil
}

func median(s [][4]float64, i int) float64 {
	xs := make([]float64, len(s))
	for j, x := range s {
		xs[j] = x[i]
	}
	sort.Float64s(xs)
	if len(xs) == 0 {
		return 0
	}
	return xs[len(xs)/2]
}

// WriteControlPlane prints the medians and the acceptance ratios.
func WriteControlPlane(w io.Writer, res []CPResult) {
	fmt.Fprintln(w, "| case | c | req/s (median) | TTFB p50 ms | store calls / request | server CPU µs / request | rounds req/s |")
	fmt.Fprintln(w, "| - | - | - | - | - | - | - |")
	by := map[string]CPResult{}
	for _, r := range res {
		by[fmt.Sprint(r.Case, r.Concurrency)] = r
		fmt.Fprintf(w, "| %s | %d | %.0f | %.2f | %.4f | %.0f | %v |\n", r.Case, r.Concurrency, r.RPS, r.TTFBp50, r.RoundTrips, r.CPUus, roundList(r.Rounds))
	}
	for _, r := range res {
		base, ok := by[fmt.Sprint("sqlite-off", r.Concurrency)]
		if !ok || r.Case == "sqlite-off" || base.RPS == 0 {
			continue
		}
		fmt.Fprintf(w, "%s / sqlite-off at c=%d: %.2f of the req/s, TTFB p50 %+.2f ms, %.2f of the server CPU per request\n",
			r.Case, r.Concurrency, r.RPS/base.RPS, r.TTFBp50-base.TTFBp50, ratio(r.CPUus, base.CPUus))
	}
}

func roundList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " ")
}

// cpServer is one server of a case, with its workspace's key.
type cpServer struct {
	cmd  *exec.Cmd
	base string
	key  string
	dir  string
}

func startCPServer(ctx context.Context, o CPOptions, c CPCase) (*cpServer, error) {
	dir, err := os.MkdirTemp("", "voicesvc-cp-")
	if err != nil {
		return nil, err
	}
	db := "sqlite://" + filepath.Join(dir, "cp.db")
	if c.Store == "postgres" {
		db = o.PG
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--billing", c.Billing,
		"--engine", "reference", "--reference-rtf", "0", "--engine-workers", "0", "--media-dir", "",
		"--log-level", "warn"}, o.Args...)
	cmd := exec.CommandContext(ctx, o.Bin, args...)
	cmd.Dir = dir
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &cpServer{cmd: cmd, dir: dir}
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if _, addr, ok := strings.Cut(lines.Text(), "voicesvc listening on "); ok {
			s.base = strings.TrimSpace(addr)
			break
		}
	}
	go io.Copy(io.Discard, stderr)
	if s.base == "" {
		s.stop()
		return nil, errors.New("the server did not start")
	}
	admin := func(a ...string) (map[string]any, error) {
		out, err := exec.CommandContext(ctx, o.Bin, append(append([]string{"admin"}, a...), "--db", db)...).Output()
		if err != nil {
			return nil, fmt.Errorf("admin %v: %w", a, err)
		}
		var m map[string]any
		return m, json.Unmarshal(out, &m)
	}
	ws, err := admin("workspace", "create", "--name", "bench-controlplane", "--plan", "enterprise")
	if err == nil {
		id, _ := ws["id"].(string)
		if _, err = admin("workspace", "update", "--id", id, "--concurrency", "100000", "--sessions", "100000",
			"--rps", strconv.Itoa(c.RPS), "--allowance", "1000000000000000"); err == nil {
			var k map[string]any
			if k, err = admin("key", "create", "--workspace", id); err == nil {
				s.key, _ = k["key"].(string)
			}
		}
	}
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *cpServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

// measure runs speak "Hi." at level and counts the store calls and the
// admitted syntheses around it on /metrics, and the server's CPU time.
func (s *cpServer) measure(ctx context.Context, o CPOptions, level int) (rps, ttfb, roundTrips, cpuUS float64, err error) {
	opts := Options{BaseURL: s.base, APIKey: s.key, Voice: "ref-en-high", Text: "Hi.",
		Scenarios: []string{"speak"}, Concurrency: level, Duration: o.Warmup}
	if _, err := Execute(ctx, opts); err != nil { // warm: caches, leases
		return 0, 0, 0, 0, err
	}
	calls0, ok0, err := s.counts(ctx)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	cpu0, err := readProcStat(s.cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	opts.Duration = o.Duration
	run, err := Execute(ctx, opts)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	cpu1, err := readProcStat(s.cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	calls1, ok1, err := s.counts(ctx)
	if err != nil {
		return 0, 0, 0, 0, err
	}
	if len(run.Results) == 0 {
		return 0, 0, 0, 0, errors.New("no result")
	}
	r := run.Results[0]
	if r.ErrorCount > 0 {
		return 0, 0, 0, 0, fmt.Errorf("%d errors: %v", r.ErrorCount, r.Errors)
	}
	if ok1 > ok0 {
		roundTrips = (calls1 - calls0) / (ok1 - ok0)
		cpuUS = (cpu1.cpu - cpu0.cpu) / (ok1 - ok0) * 1e6
	}
	return r.Throughput, r.TTFB.P50, roundTrips, cpuUS, nil
}

// counts reads the store calls (every voicesvc_store_duration_seconds
// method) and the speak syntheses that succeeded.
func (s *cpServer) counts(ctx context.Context) (calls, ok float64, err error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, found := strings.Cut(line, " ")
		if !found {
			continue
		}
		v, perr := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if perr != nil {
			continue
		}
		switch {
		case strings.HasPrefix(name, "voicesvc_store_duration_seconds_count{"):
			calls += v
		case strings.HasPrefix(name, "voicesvc_synth_total{") && strings.Contains(name, `transport="speak"`) &&
			strings.Contains(name, `outcome="ok"`):
			ok += v
		}
	}
	return calls, ok, sc.Err()
}
