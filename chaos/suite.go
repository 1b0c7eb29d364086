// Package chaos is the hardening suite of voicesvc: probes that start the
// real binary on loopback and attack it the way a hostile or broken client,
// a dying dependency or an operator would (memory and descriptor
// exhaustion, slow and silent clients, revocation, store outages, signals,
// a full disk), each checked against the service's contract; and a soak
// run of steady mixed traffic that samples the server's memory, goroutines
// and descriptors. cmd/voicesvc-chaos is its command line; TestChaosFast
// runs the quick probes under go test.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Result is one probe's verdict.
type Result struct {
	Probe    string
	Expected string
	Observed string
	Pass     bool
	Skipped  bool // the probe could not run here (reason in Observed); counts as failed
	Took     time.Duration
}

// Probe is one check. Fast probes finish within a few seconds and need no
// root-only tricks; they make up TestChaosFast and `make chaos-fast`.
type Probe struct {
	Name     string
	Fast     bool
	Expected string
	Run      func(ctx context.Context, s *Suite) (observed string, pass bool)
}

// Suite holds what the probes share: the binary, a temp dir, the servers
// started (for the crash check and cleanup), the secrets minted (for the
// log check) and a main server whose baseline the leak checks compare with.
type Suite struct {
	Bin string
	Tmp string
	Log io.Writer // progress lines; nil = quiet

	mu       sync.Mutex
	servers  []*Server
	secrets  []string
	mismatch []string // billing mismatches seen by any probe
	cleanups []func()

	pg       *PG
	pgErr    error
	pgOnce   sync.Once
	clipOnce sync.Once
	clip     []byte
	clipErr  error
	upOnce   sync.Once
	up       *upRig
	upErr    error

	Main     *Server
	MainEnv  *Env
	baseFDs  int
	baseGors int
}

// NewSuite makes a suite around the voicesvc binary at bin.
func NewSuite(bin string, log io.Writer) (*Suite, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("voicesvc binary: %w (run make build)", err)
	}
	tmp, err := os.MkdirTemp("", "voicesvc-chaos-")
	if err != nil {
		return nil, err
	}
	raiseNoFile()
	return &Suite{Bin: bin, Tmp: tmp, Log: log}, nil
}

// raiseNoFile lifts the suite's own descriptor limit to its hard limit: the
// slowloris probe holds thousands of sockets.
func raiseNoFile() {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) == nil && r.Cur < r.Max {
		r.Cur = r.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &r)
	}
}

func (s *Suite) logf(format string, a ...any) {
	if s.Log != nil {
		fmt.Fprintf(s.Log, "chaos: "+format+"\n", a...)
	}
}

func (s *Suite) track(srv *Server) {
	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()
}

// Secret records a credential the logs must never contain.
func (s *Suite) Secret(v string) {
	s.mu.Lock()
	s.secrets = append(s.secrets, v)
	s.mu.Unlock()
}

// Mismatch records a billing mismatch for the closing check.
func (s *Suite) Mismatch(m string) {
	s.mu.Lock()
	s.mismatch = append(s.mismatch, m)
	s.mu.Unlock()
}

// OnClose runs f when the suite closes (cleanups in reverse order).
func (s *Suite) OnClose(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

// Close stops every server the suite started and removes its files.
func (s *Suite) Close() {
	s.mu.Lock()
	servers, cleanups := s.servers, s.cleanups
	s.mu.Unlock()
	for _, srv := range servers {
		srv.Stop()
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	os.RemoveAll(s.Tmp)
}

// Admin runs `voicesvc admin ARGS... --db db` and decodes its JSON output.
func (s *Suite) Admin(db string, args ...string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin, append(append([]string{"admin"}, args...), "--db", db)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("admin %v: %v: %s", args, err, stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		return nil, fmt.Errorf("admin %v printed %q", args, out)
	}
	return m, nil
}

// Run runs the probes whose names match filter (nil = all), then the
// closing checks, and returns every result in order.
func (s *Suite) Run(ctx context.Context, probes []Probe, filter *regexp.Regexp) []Result {
	var out []Result
	if err := s.startMain(); err != nil {
		return []Result{{Probe: "setup", Expected: "main server starts", Observed: err.Error()}}
	}
	for _, p := range probes {
		if filter != nil && !filter.MatchString(p.Name) {
			continue
		}
		s.logf("probe %s ...", p.Name)
		start := time.Now()
		pctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		obs, pass := runGuarded(pctx, s, p)
		cancel()
		r := Result{Probe: p.Name, Expected: p.Expected, Observed: obs, Pass: pass, Took: time.Since(start)}
		s.logf("probe %s: %s (%s) %s", p.Name, verdict(r), r.Took.Round(100*time.Millisecond), obs)
		out = append(out, r)
	}
	out = append(out, s.closingChecks()...)
	return out
}

// runGuarded turns a probe's panic into a failed result: the tool itself
// must not crash on a surprising answer.
func runGuarded(ctx context.Context, s *Suite, p Probe) (obs string, pass bool) {
	defer func() {
		if r := recover(); r != nil {
			obs, pass = fmt.Sprintf("probe panicked: %v", r), false
		}
	}()
	return p.Run(ctx, s)
}

func verdict(r Result) string {
	switch {
	case r.Pass:
		return "PASS"
	case r.Skipped:
		return "SKIP"
	}
	return "FAIL"
}

// Report prints the table and the closing count line, and reports whether
// every result passed.
func Report(w io.Writer, results []Result) bool {
	fmt.Fprintf(w, "\n%-4s  %-26s  %-60s  %s\n", "", "probe", "expected", "observed")
	failed := 0
	for _, r := range results {
		if !r.Pass {
			failed++
		}
		fmt.Fprintf(w, "%-4s  %-26s  %-60s  %s\n", verdict(r), r.Probe, r.Expected, r.Observed)
	}
	fmt.Fprintf(w, "\n%d passed, %d failed\n", len(results)-failed, failed)
	return failed == 0
}

// secretsIn lists the recorded secrets found in text.
func (s *Suite) secretsIn(text string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var found []string
	for _, sec := range s.secrets {
		if sec != "" && strings.Contains(text, sec) {
			found = append(found, sec[:8]+"…")
		}
	}
	sort.Strings(found)
	return found
}
