package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSelectCPCases: --cases runs exactly the cases it names (a regression:
// once the first named case was found, every case after it ran too).
func TestSelectCPCases(t *testing.T) {
	for _, tc := range []struct {
		names string
		pg    bool
		want  []string
		bad   bool
	}{
		{"", false, []string{"sqlite-off", "sqlite-enforce", "sqlite-enforce-rps"}, false},
		{"", true, []string{"sqlite-off", "sqlite-enforce", "postgres-enforce", "postgres-off", "sqlite-enforce-rps", "postgres-enforce-rps"}, false},
		{"sqlite-off", true, []string{"sqlite-off"}, false},
		{"postgres-off,sqlite-off", true, []string{"sqlite-off", "postgres-off"}, false},
		{"postgres-off", false, nil, true},
		{"nope", true, nil, true},
	} {
		got, err := selectCPCases(tc.names, tc.pg)
		if (err != nil) != tc.bad {
			t.Errorf("%q pg=%v: error %v", tc.names, tc.pg, err)
			continue
		}
		var names []string
		for _, c := range got {
			names = append(names, c.Name)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("%q pg=%v: %v, want %v", tc.names, tc.pg, names, tc.want)
		}
	}
}

// TestWriteControlPlane: each case is set against sqlite-off at its level,
// in req/s, TTFB and server CPU per request.
func TestWriteControlPlane(t *testing.T) {
	var b strings.Builder
	WriteControlPlane(&b, []CPResult{
		{Case: "sqlite-off", Concurrency: 16, RPS: 10000, TTFBp50: 1.0, CPUus: 200},
		{Case: "postgres-enforce", Concurrency: 16, RPS: 9000, TTFBp50: 1.25, CPUus: 210, RoundTrips: 0.0004},
		{Case: "postgres-enforce", Concurrency: 64, RPS: 9000, TTFBp50: 5},
	})
	out := b.String()
	for _, want := range []string{
		"| postgres-enforce | 16 | 9000 | 1.25 | 0.0004 | 210 |",
		"postgres-enforce / sqlite-off at c=16: 0.90 of the req/s, TTFB p50 +0.25 ms, 1.05 of the server CPU per request",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "at c=64") {
		t.Errorf("a ratio without sqlite-off at its level:\n%s", out)
	}
}

// TestAbsBinary: --bin as make bench passes it (relative to the checkout)
// names the same file from any directory. A regression: the servers, run
// in directories of their own, could not be started from bin/voicesvc.
func TestAbsBinary(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := os.MkdirAll("bin", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("bin/voicesvc", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := absBinary("bin/voicesvc")
	if err != nil || !filepath.IsAbs(got) {
		t.Fatalf("absBinary: %q %v", got, err)
	}
	if want, _ := filepath.EvalSymlinks(filepath.Join(dir, "bin", "voicesvc")); mustEval(t, got) != want {
		t.Errorf("absBinary: %q, want %q", got, want)
	}
	if sh, err := absBinary("sh"); err != nil || !filepath.IsAbs(sh) {
		t.Errorf("a bare name from PATH: %q %v", sh, err)
	}
	if _, err := absBinary("no-such-voicesvc-binary"); err == nil {
		t.Error("a bare name not in PATH was taken")
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSummaryWithControlPlane: make bench's output directory, runs and the
// control plane's results side by side, summarizes (a regression: the
// control plane wrote results.json, which bench summary could not read as
// a run, so the whole summary failed).
func TestSummaryWithControlPlane(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "reference"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := &Run{Engine: "reference", Results: []*Result{{Scenario: "speak", Mode: "closed", Concurrency: 1,
		TTFB: Dist{N: 10, P50: 0.5, P99: 1}}}}
	if err := run.WriteJSON(filepath.Join(dir, "reference", "results.json")); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	if code := summaryMain([]string{dir}, &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), "Control plane") {
		t.Fatalf("without a control plane: %d %s\n%s", code, stderr.String(), stdout.String())
	}
	cp := filepath.Join(dir, "controlplane")
	if err := WriteControlPlaneJSON(cp, []CPResult{
		{Case: "sqlite-off", Concurrency: 16, RPS: 10000, TTFBp50: 1, CPUus: 200},
		{Case: "sqlite-enforce", Concurrency: 16, RPS: 9500, TTFBp50: 1.05, CPUus: 200},
	}); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := summaryMain([]string{dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("summary: %d %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "## Control plane") ||
		!strings.Contains(stdout.String(), "sqlite-enforce / sqlite-off at c=16: 0.95 of the req/s") {
		t.Fatalf("summary:\n%s", stdout.String())
	}
}
