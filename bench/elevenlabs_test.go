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

// TestScanElevenLabsMsg: the quick read of audio messages agrees with a
// JSON decode, and anything else is decoded in full.
func TestScanElevenLabsMsg(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want elevenLabsMsg
		ok   bool
	}{
		{`{"audio":"AAAA","isFinal":false,"alignment":{"chars":["e","r"]},"contextId":"c1"}`, elevenLabsMsg{Audio: 4}, true},
		{`{"audio":"AAAABBBB","isFinal":true}`, elevenLabsMsg{Audio: 8, IsFinal: true}, true},
		{`{"audio":null,"isFinal":true,"contextId":"c"}`, elevenLabsMsg{IsFinal: true}, true},
		{`{"isFinal":false, "audio":"AAAA"}`, elevenLabsMsg{Audio: 4}, true},
		{`{"error":"rate_limited","message":"slow down"}`, elevenLabsMsg{Error: "rate_limited"}, true},
		{`{"audio":"AA","error":"x"}`, elevenLabsMsg{Audio: 2, Error: "x"}, true},
		{`{"audio":"AA`, elevenLabsMsg{}, false},
		{`not json`, elevenLabsMsg{}, false},
	} {
		got, ok := scanElevenLabsMsg([]byte(tc.msg))
		if ok != tc.ok || ok && got != tc.want {
			t.Errorf("%s: %+v %v, want %+v %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}
