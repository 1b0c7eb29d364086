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
