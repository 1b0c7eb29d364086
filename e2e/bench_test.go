package e2e

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"voicesvc/bench"
	"voicesvc/e2e/harness"
)

// TestBenchSmoke runs `voicesvc bench` for a few seconds over all four
// scenarios against the real binary (reference engine, unpaced) and checks
// only that it ran and wrote a well-formed report: the figures themselves
// belong to make bench.
func TestBenchSmoke(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference", "--reference-rtf", "0", "--billing", "off"}})
	wsID, key := harness.Workspace(t, srv.DB, "enterprise")
	harness.Admin(t, srv.DB, "workspace", "update", "--id", wsID, "--concurrency", "64", "--rps", "0", "--sessions", "16", "--billing", "off")

	out := filepath.Join(t.TempDir(), "run")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := bench.Main(ctx, []string{"--base", srv.URL, "--key", key, "--scenario", "speak,sse,ws,compat",
		"--concurrency", "2", "--duration", "500ms", "--warmup", "100ms", "--timeout", "5s",
		"--server-pid", strconv.Itoa(srv.PID()), "--out", out, "--quiet"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("bench exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}

	run, err := bench.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	if run.Engine != "reference" {
		t.Errorf("engine %q, want reference", run.Engine)
	}
	seen := map[string]int{}
	for _, r := range run.Results {
		seen[r.Scenario]++
		if r.Operations == 0 || r.OK == 0 || r.TTFB.N == 0 {
			t.Errorf("%s %s: %d operations, %d ok, %d TTFB samples; errors %v",
				r.Scenario, r.LoadLabel(), r.Operations, r.OK, r.TTFB.N, r.Errors)
		}
	}
	for _, s := range bench.Scenarios {
		if seen[s] != 1 {
			t.Errorf("scenario %s: %d results, want 1", s, seen[s])
		}
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.Contains(string(md), "`reference`") {
		t.Errorf("report.md: %v, names the engine: %v", err, strings.Contains(string(md), "`reference`"))
	}
	pngs, _ := filepath.Glob(filepath.Join(out, "*.png"))
	if len(pngs) == 0 {
		t.Fatal("no PNG plots")
	}
	for _, p := range pngs {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() == 0 || img.Bounds().Dy() == 0 {
			t.Errorf("%s: not a valid PNG: %v", filepath.Base(p), err)
		}
	}
	for _, r := range run.Results {
		if r.Server.Source != "proc" {
			t.Errorf("%s %s: server usage from %q, want proc", r.Scenario, r.LoadLabel(), r.Server.Source)
			break
		}
	}
	if !strings.Contains(stdout.String(), "scenario") {
		t.Errorf("no table on stdout:\n%s", stdout.String())
	}
}
