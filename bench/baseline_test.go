package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain runs the bare server when a baseline test starts this binary
// as its `voicesvc bench bare` (bareCommand), and the tests otherwise.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "bare" {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	bareCommand = func() ([]string, error) { return []string{os.Args[0], "bench", "bare"}, nil }
	os.Exit(m.Run())
}

func TestBaselineOfArithmetic(t *testing.T) {
	res := func(scn string, c int, p50, p99 float64, errs int) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: c, ErrorCount: errs,
			TTFB: Dist{N: 100, P50: p50, P99: p99}}
	}
	run := &Run{Results: []*Result{
		// Three rounds at c=1: medians 0.15/0.5 (bare) and 0.2/0.8 (voicesvc).
		res("bare-sse", 1, 0.15, 0.5, 0), res("sse", 1, 0.2, 0.8, 0),
		res("sse", 1, 0.25, 0.7, 0), res("bare-sse", 1, 0.1, 0.4, 0),
		res("bare-sse", 1, 0.2, 0.9, 0), res("sse", 1, 0.1, 2.0, 0),
		// c=64: one round, the bound is on p99 only; an error fails it.
		res("bare-sse", 64, 1, 4, 0), res("sse", 64, 5, 4.5, 1),
		// speak before sse in the output; p50 within, p99 over.
		res("bare-speak", 1, 0.1, 0.2, 0), res("speak", 1, 0.15, 0.8, 0),
		// No bare counterpart: left out.
		res("ws", 1, 0.1, 0.2, 0),
		// A bare side without any TTFB sample: left out.
		{Scenario: "bare-compat", Concurrency: 1}, res("compat", 1, 0.1, 0.2, 0),
	}}
	got := BaselineOf(run)
	if len(got) != 3 {
		t.Fatalf("%d rows, want 3: %+v", len(got), got)
	}
	sp, s1, s64 := got[0], got[1], got[2]
	if sp.Transport != "speak" || s1.Transport != "sse" || s1.Concurrency != 1 || s64.Concurrency != 64 {
		t.Fatalf("order: %+v", got)
	}
	if s1.Rounds != 3 || !near(s1.BareP50, 0.15) || !near(s1.SvcP50, 0.2) || !near(s1.BareP99, 0.5) ||
		!near(s1.SvcP99, 0.8) || !near(s1.AddedP50, 0.05) || !near(s1.AddedP99, 0.3) ||
		!near(s1.RatioP50, 0.2/0.15) || !near(s1.RatioP99, 1.6) || s1.BareSamples != 300 {
		t.Errorf("sse c=1: %+v", s1)
	}
	if met, bounded := s1.Met(); !met || !bounded {
		t.Errorf("sse c=1: met %v bounded %v", met, bounded)
	}
	if met, _ := sp.Met(); met || !near(sp.AddedP99, 0.6) {
		t.Errorf("speak c=1 p99 added %.3f ms met", sp.AddedP99)
	}
	if met, bounded := s64.Met(); met || !bounded || s64.SvcErrors != 1 || !near(s64.AddedP50, 4) {
		t.Errorf("sse c=64 (an error, p50 not bounded): %+v", s64)
	}
	if _, bounded := (BaselineRow{Concurrency: 16}).Met(); bounded {
		t.Error("c=16 has no bound")
	}
	if ratio(1, 0) != 0 {
		t.Error("ratio over a zero baseline")
	}
	var b bytes.Buffer
	WriteBaseline(&b, run)
	if !strings.Contains(b.String(), "| sse | 1 | 0.150 ms | 0.200 ms | +0.050 ms | 1.33x | 0.500 ms | 0.800 ms | +0.300 ms | 1.60x | 0/0 | yes |") {
		t.Errorf("table:\n%s", b.String())
	}
}

// TestBaselineSmoke records the fake server's answers, replays them from
// the bare server and measures both sides of every transport.
func TestBaselineSmoke(t *testing.T) {
	srv := newFakeServer(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{"baseline",
		"--base", srv.URL, "--key", fakeKey, "--requests", "5", "--sweep", "1,3", "--rounds", "2",
		"--warmup", "0s", "--quiet", "--out", dir,
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	// 2 levels x 2 rounds x 4 transports x 2 sides.
	if len(run.Results) != 32 {
		t.Fatalf("%d results", len(run.Results))
	}
	for _, r := range run.Results {
		if r.Operations != 5 || r.OK != 5 || r.ErrorCount != 0 || !near(r.AudioSeconds, 0.5) {
			t.Errorf("%s c=%d: ops %d ok %d errors %v audio %v", r.Scenario, r.Concurrency, r.Operations, r.OK, r.Errors, r.AudioSeconds)
		}
		// Levels over one stream are listeners; one stream asks back to back.
		if r.Paced != (r.Concurrency > 1) {
			t.Errorf("%s c=%d: paced %v", r.Scenario, r.Concurrency, r.Paced)
		}
		// The bare server is a process of its own, measured like voicesvc.
		if bare := strings.HasPrefix(r.Scenario, barePrefix); bare &&
			(r.Server.Source != "proc" || r.Server.PID == 0 || r.Server.PID == os.Getpid()) {
			t.Errorf("%s c=%d: server usage %+v, want another process's", r.Scenario, r.Concurrency, r.Server)
		}
	}
	rows := BaselineOf(run)
	if len(rows) != 8 {
		t.Fatalf("%d baseline rows", len(rows))
	}
	for _, b := range rows {
		if b.Rounds != 2 || b.BareSamples != 10 || b.SvcSamples != 10 {
			t.Errorf("%+v", b)
		}
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, out := range []string{string(md), stdout.String()} {
		if !strings.Contains(out, "bare fasthttp server") || !strings.Contains(out, "| ws | 3 |") {
			t.Errorf("no baseline table in:\n%s", out)
		}
	}
	var sum bytes.Buffer
	WriteSummary(&sum, []*Run{run}, []string{"baseline"})
	if !strings.Contains(sum.String(), "compat: gateway-added TTFB over a bare fasthttp server at 1, p50 <= 0.1 ms, p99 <= 0.5 ms") {
		t.Errorf("summary targets:\n%s", sum.String())
	}
}
