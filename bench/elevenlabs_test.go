package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestElevenLabsDialectAdded: an elevenlabs run pairs its native (direct)
// and stream-input (via) results as medians over the rounds, level by
// level, and the summary checks them against the dialect target.
func TestElevenLabsDialectAdded(t *testing.T) {
	res := func(scn string, c int, p50 float64) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: c, TTFB: Dist{N: 100, P50: p50, P99: 2 * p50}}
	}
	run := &Run{Engine: "elevenlabs", Results: []*Result{
		res(scenarioElevenLabs, 1, 0.55), res(scenarioElevenLabsNative, 1, 0.50),
		res(scenarioElevenLabs, 1, 0.52), res(scenarioElevenLabsNative, 1, 0.47),
		res(scenarioElevenLabs, 1, 0.90), res(scenarioElevenLabsNative, 1, 0.49),
		res(scenarioElevenLabs, 64, 1.2), res(scenarioElevenLabsNative, 64, 1.1),
	}}
	got := DialectAddedOf(run)
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if len(got) != 2 || got[0].Concurrency != 1 || got[0].Rounds != 3 || !near(got[0].DirectP50, 0.49) ||
		!near(got[0].ViaP50, 0.55) || !near(got[0].AddedP50, 0.06) || got[1].Concurrency != 64 || !near(got[1].AddedP50, 0.1) {
		t.Fatalf("%+v", got)
	}
	var b bytes.Buffer
	WriteSummary(&b, []*Run{run}, []string{"elevenlabs"})
	if !strings.Contains(b.String(), "elevenlabs: dialect-added TTFB <= 0.05 ms p50 at 1 streams") || !strings.Contains(b.String(), "| **no** |") {
		t.Fatalf("summary:\n%s", b.String())
	}
}
