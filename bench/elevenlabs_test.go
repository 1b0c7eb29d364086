package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestDialectAdded: the elevenlabs and elevenlabs-native results of each
// level pair as medians over the rounds, level by level.
func TestDialectAdded(t *testing.T) {
	res := func(scn string, c int, p50 float64, errs int) *Result {
		return &Result{Scenario: scn, Mode: "closed", Concurrency: c, TTFB: Dist{N: 100, P50: p50}, ErrorCount: errs}
	}
	run := &Run{Engine: "elevenlabs", Results: []*Result{
		res(scenarioElevenLabs, 1, 0.55, 0), res(scenarioElevenLabsNative, 1, 0.50, 0),
		res(scenarioElevenLabs, 1, 0.52, 0), res(scenarioElevenLabsNative, 1, 0.47, 1),
		res(scenarioElevenLabs, 1, 0.90, 0), res(scenarioElevenLabsNative, 1, 0.49, 0),
		res(scenarioElevenLabs, 64, 1.2, 0), res(scenarioElevenLabsNative, 64, 1.1, 0),
	}}
	got := DialectAddedOf(run)
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if len(got) != 2 || got[0].Concurrency != 1 || got[0].Rounds != 3 || !near(got[0].NativeP50, 0.49) ||
		!near(got[0].DialectP50, 0.55) || !near(got[0].AddedP50, 0.06) || got[0].NativeErrors != 1 ||
		got[1].Concurrency != 64 || !near(got[1].AddedP50, 0.1) {
		t.Fatalf("%+v", got)
	}
	var b bytes.Buffer
	WriteDialectAdded(&b, run)
	if !strings.Contains(b.String(), "| 1 | 0.490 | 0.550 | +0.060 | 1/0 |") {
		t.Fatalf("table:\n%s", b.String())
	}
}
