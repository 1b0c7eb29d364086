package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeOptions bounds a run by count, not time, so tests assert no timings.
func fakeOptions(srv string, scenario string) Options {
	return Options{
		BaseURL: srv, APIKey: fakeKey, Scenarios: []string{scenario},
		Concurrency: 2, Requests: 6, Timeout: 10 * time.Second, MaxTime: time.Minute,
	}
}

func TestScenariosEndToEnd(t *testing.T) {
	srv := newFakeServer(t)
	tests := []struct {
		name     string
		scenario string
		mutate   func(*Options)
		wantOK   int
		wantErr  string
		wantGaps bool
		// refused: every operation was turned away for capacity (counted
		// apart from ok and errors); each worker then waits the second
		// the server asks, so these run one operation a worker.
		refused bool
	}{
		{"speak", "speak", nil, 6, "", false, false},
		{"sse", "sse", nil, 6, "", true, false},
		{"compat pcm by alias", "compat", func(o *Options) { o.Voice = "fake-voice" }, 6, "", false, false},
		{"compat wav", "compat", func(o *Options) { o.Format = "wav" }, 6, "", false, false},
		{"ws whole sentence", "ws", nil, 6, "", true, false},
		{"ws streamed words", "ws", func(o *Options) { o.TextMode, o.TPS, o.Text = "stream", 1000, "one two three" }, 6, "", true, false},
		{"ws five contexts over two sessions", "ws", func(o *Options) { o.Concurrency, o.Contexts = 5, 3 }, 6, "", true, false},
		{"speak refused", "speak", func(o *Options) { o.Voice = fakeLimited }, 0, "429 rate_limited", false, false},
		{"sse refused", "sse", func(o *Options) { o.Voice = fakeLimited }, 0, "429 rate_limited", false, false},
		{"ws unknown voice", "ws", func(o *Options) { o.Voice = fakeLimited }, 0, "ws:voice_not_found", false, false},
		{"ws audio from bytes", "ws", func(o *Options) { o.Voice = fakeNoDur }, 6, "", true, false},
		{"ws pairing violation", "ws", func(o *Options) { o.Voice, o.Concurrency = fakeBadPair, 1 }, 0, "ws:pairing", false, false},
		{"bad key", "speak", func(o *Options) { o.APIKey = "nope"; o.Voice = fakeVoice }, 0, "401", false, false},
		{"speak at capacity", "speak", func(o *Options) { o.Voice, o.Concurrency = fakeBusy, 6 }, 0, "", false, true},
		{"sse at capacity", "sse", func(o *Options) { o.Voice, o.Concurrency = fakeBusy, 6 }, 0, "", false, true},
		{"ws context at capacity", "ws", func(o *Options) { o.Voice, o.Concurrency = fakeBusy, 6 }, 0, "", false, true},
		{"ws handshake at capacity", "ws", func(o *Options) { o.APIKey, o.Voice, o.Concurrency = fakeBusyKey, fakeVoice, 6 }, 0, "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := fakeOptions(srv.URL, tc.scenario)
			if tc.mutate != nil {
				tc.mutate(&o)
			}
			run, err := Execute(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if run.Engine != "fake" || len(run.Results) != 1 {
				t.Fatalf("engine %q, %d results", run.Engine, len(run.Results))
			}
			r := run.Results[0]
			if r.Operations != 6 || r.OK != tc.wantOK {
				t.Fatalf("ops %d ok %d, want 6 %d; errors %v", r.Operations, r.OK, tc.wantOK, r.Errors)
			}
			if tc.refused {
				if r.Refused != 6 || r.ErrorCount != 0 || r.Refusal.N != 6 || r.TTFB.N != 0 {
					t.Fatalf("refused %d (%d timed), errors %v, ttfb n %d: want 6 refusals, no errors", r.Refused, r.Refusal.N, r.Errors, r.TTFB.N)
				}
				return
			}
			if tc.wantErr != "" && r.Errors[tc.wantErr] != 6 {
				t.Fatalf("errors %v, want 6 x %q", r.Errors, tc.wantErr)
			}
			if tc.wantOK == 0 {
				return
			}
			if r.ErrorCount != 0 || r.TTFB.N != 6 || !near(r.AudioSeconds, 0.6) {
				t.Errorf("errors %v ttfb n %d audio %v", r.Errors, r.TTFB.N, r.AudioSeconds)
			}
			if tc.wantGaps != (r.Gap.N > 0) {
				t.Errorf("gap samples %d, want some: %v", r.Gap.N, tc.wantGaps)
			}
			if r.Server.Source != "proc" && r.Server.Source != "metrics" {
				t.Errorf("server usage source %q", r.Server.Source)
			}
		})
	}
}

func TestOpenLoopBounded(t *testing.T) {
	srv := newFakeServer(t)
	for _, scn := range []string{"sse", "ws"} {
		t.Run(scn, func(t *testing.T) {
			o := fakeOptions(srv.URL, scn)
			o.Rate, o.Requests = 200, 5
			run, err := Execute(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			r := run.Results[0]
			// Every measured arrival either ran or was dropped for want of a slot.
			if r.Mode != "open" || r.Operations+r.Errors["client:dropped"] != 5 {
				t.Errorf("mode %s ops %d errors %v", r.Mode, r.Operations, r.Errors)
			}
		})
	}
}

func TestReportOutputs(t *testing.T) {
	srv := newFakeServer(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), []string{
		"--base", srv.URL, "--key", fakeKey, "--scenario", "sse,speak", "--sweep", "1,2",
		"--requests", "4", "--warmup", "0s", "--quiet", "--out", dir,
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != 4 || run.Engine != "fake" || strings.Contains(strings.Join(run.Args, " "), fakeKey) {
		t.Fatalf("results %d engine %q args %v", len(run.Results), run.Engine, run.Args)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "results.json"))
	if !json.Valid(raw) {
		t.Fatal("results.json is not valid JSON")
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# voicesvc benchmark", "| engine | `fake` |", "| sse | s16le | c=2 |", "## Plots", "load_all.png"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	pngs, _ := filepath.Glob(filepath.Join(dir, "*.png"))
	if len(pngs) < 5 {
		t.Errorf("only %d PNGs: %v", len(pngs), pngs)
	}
	for _, p := range pngs {
		b, _ := os.ReadFile(p)
		if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Errorf("%s is not a PNG", p)
		}
		if !bytes.Contains(md, []byte("("+filepath.Base(p)+")")) {
			t.Errorf("report.md does not embed %s", filepath.Base(p))
		}
	}
	if !strings.Contains(stdout.String(), "ttfb p50") {
		t.Errorf("no table on stdout: %s", stdout.String())
	}

	stdout.Reset()
	if code := Main(context.Background(), []string{"compare", dir, filepath.Join(dir, "results.json")}, &stdout, &stderr); code != 0 {
		t.Fatalf("compare exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "1.00x") || strings.Contains(stdout.String(), "only in") {
		t.Errorf("compare of a run with itself:\n%s", stdout.String())
	}
}

func TestMainUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"no key", []string{"--base", "http://127.0.0.1:1"}, 2},
		{"bad sweep", []string{"--key", "k", "--sweep", "1,x"}, 2},
		{"stray argument", []string{"--key", "k", "extra"}, 2},
		{"unknown scenario", []string{"--key", "k", "--scenario", "fax", "--base", "http://127.0.0.1:1"}, 1},
		{"compare missing files", []string{"--compare", "/nonexistent/a", "/nonexistent/b"}, 1},
		{"help", []string{"-h"}, 0},
		{"bad overload factor", []string{"--key", "k", "--overload", "10", "--overload-factors", "1.5,x"}, 2},
		{"negative overload", []string{"--key", "k", "--overload", "-1"}, 2},
		{"overload with baseline", []string{"--key", "k", "--overload", "10", "--baseline"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("VOICESVC_API_KEY", "")
			var out, errb bytes.Buffer
			if got := Main(context.Background(), tc.args, &out, &errb); got != tc.want {
				t.Errorf("exit %d, want %d (%s)", got, tc.want, errb.String())
			}
		})
	}
}

func TestRedact(t *testing.T) {
	got := strings.Join(redact([]string{"--key", "secret", "--key=secret2", "--base", "x"}), " ")
	if strings.Contains(got, "secret") {
		t.Errorf("key leaked: %s", got)
	}
}

func TestSuiteShort(t *testing.T) {
	srv := newFakeServer(t)
	dir := t.TempDir()
	var stdout bytes.Buffer
	run, err := Suite(context.Background(), SuiteOptions{
		BaseURL: srv.URL, APIKey: fakeKey, Out: dir,
		Levels: []int{2}, Duration: 200 * time.Millisecond, Warmup: -1,
		Overload: 2, OverloadFactors: []float64{1.5}, OverloadDuration: 200 * time.Millisecond,
	}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	// Last, the overload probe: paced ws at 1.5 x 2 streams, the
	// two-sentence text.
	last := run.Results[len(run.Results)-1]
	if o := last.Overload; o == nil || o.Capacity != 2 || o.Factor != 1.5 || last.Scenario != "ws" || !last.Paced ||
		last.Concurrency != 3 || last.TextChars != len(DefaultText) || last.OK == 0 {
		t.Fatalf("overload level %+v", last)
	}
	var got []string
	for _, r := range run.Results[:len(run.Results)-1] {
		got = append(got, r.Scenario)
		if r.OK == 0 || r.ErrorCount != 0 {
			t.Errorf("%s: ok %d errors %v", r.Scenario, r.OK, r.Errors)
		}
	}
	if strings.Join(got, ",") != strings.Join(Scenarios, ",") {
		t.Errorf("scenarios %v, want %v", got, Scenarios)
	}
	for _, f := range []string{"results.json", "report.md"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}
