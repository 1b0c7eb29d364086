package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// GatewayAddedOf pairs the direct and via results of each level, takes the
// medians over the rounds and the via server's CPU per audio second; the
// summary checks it against the targets.
func TestGatewayAdded(t *testing.T) {
	res := func(scn string, p50, p99, cpu, audio float64) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: 64, TTFB: Dist{N: 100, P50: p50, P99: p99},
			AudioSeconds: audio, Server: ServerUsage{CPUSeconds: cpu}}
	}
	run := &Run{Engine: "openai", Results: []*Result{
		res(scenarioOpenAI, 1.0, 2.0, 0, 100), res(scenarioOpenAIVia, 1.2, 2.5, 0.1, 100),
		res(scenarioOpenAI, 0.9, 3.0, 0, 100), res(scenarioOpenAIVia, 1.1, 3.2, 0.1, 100),
		res(scenarioOpenAI, 5.0, 9.0, 0, 100), res(scenarioOpenAIVia, 9.0, 9.9, 0.1, 100),
	}}
	got := GatewayAddedOf(run)
	if len(got) != 1 {
		t.Fatalf("%+v", got)
	}
	a := got[0]
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if a.Rounds != 3 || !near(a.DirectP50, 1.0) || !near(a.ViaP50, 1.2) || !near(a.AddedP50, 0.2) ||
		!near(a.DirectP99, 3.0) || !near(a.ViaP99, 3.2) || !near(a.ViaCPUPerAudioSecond, 0.001) {
		t.Fatalf("%+v", a)
	}
	var b bytes.Buffer
	WriteSummary(&b, []*Run{run}, []string{"upstream"})
	if !strings.Contains(b.String(), "gateway-added TTFB <= 0.3 ms p50") || !strings.Contains(b.String(), "| yes |") {
		t.Fatalf("summary:\n%s", b.String())
	}
}

// DialectAddedOf pairs a cartesia run's native (direct) and Cartesia (via)
// results; the summary checks the 0.05 ms target at each level.
func TestDialectAdded(t *testing.T) {
	res := func(scn string, c int, p50 float64) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: c, TTFB: Dist{N: 100, P50: p50, P99: 2 * p50}, AudioSeconds: 10}
	}
	run := &Run{Engine: "cartesia", Results: []*Result{
		res(scenarioCartesia, 1, 0.52), res(scenarioCartesiaNative, 1, 0.50),
		res(scenarioCartesia, 64, 0.90), res(scenarioCartesiaNative, 64, 0.70),
	}}
	got := DialectAddedOf(run)
	if len(got) != 2 || math.Abs(got[0].AddedP50-0.02) > 1e-9 || math.Abs(got[1].AddedP50-0.2) > 1e-9 {
		t.Fatalf("%+v", got)
	}
	var b bytes.Buffer
	WriteSummary(&b, []*Run{run}, []string{"cartesia"})
	if !strings.Contains(b.String(), "at 1 streams | medians of 1 rounds: native p50 0.500, cartesia p50 0.520 (added +0.020)") ||
		!strings.Contains(b.String(), "| yes |") || !strings.Contains(b.String(), "| **no** |") {
		t.Fatalf("summary:\n%s", b.String())
	}
}

// DialectAddedOf pairs each dialect's own scenarios (a deepgram run's
// native and speak-socket results), none of another target's, and
// WriteGatewayAdded titles the table by the dialect.
func TestDialectAddedByEngine(t *testing.T) {
	res := func(scn string, p50 float64) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: 1, TTFB: Dist{N: 100, P50: p50, P99: 2 * p50}}
	}
	results := []*Result{res(scenarioDeepgram, 0.53), res(scenarioDeepgramNative, 0.50),
		res(scenarioCartesia, 0.9), res(scenarioCartesiaNative, 0.1)}
	for _, tc := range []struct {
		engine string
		added  float64 // -1: no rows
		title  string
	}{
		{"deepgram", 0.03, "the native WebSocket and the Deepgram socket"},
		{"cartesia", 0.8, "the Cartesia socket (via, --base)"},
		{"voicesvc", -1, ""},
	} {
		run := &Run{Engine: tc.engine, Results: results}
		got := DialectAddedOf(run)
		var b bytes.Buffer
		WriteGatewayAdded(&b, run)
		if tc.added < 0 {
			if len(got) != 0 || b.Len() != 0 {
				t.Errorf("%s: %+v\n%s", tc.engine, got, b.String())
			}
			continue
		}
		if len(got) != 1 || math.Abs(got[0].AddedP50-tc.added) > 1e-9 || !strings.Contains(b.String(), tc.title) {
			t.Errorf("%s: %+v\n%s", tc.engine, got, b.String())
		}
	}
}
