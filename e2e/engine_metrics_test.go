package e2e

import (
	"strings"
	"testing"

	"voicesvc/e2e/harness"
)

// With --engine reference (no engine pool) /metrics still has the
// voicesvc_engine_* series the dashboard reads, and they count a synthesis.
func TestReferenceEngineMetrics(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference", "--reference-rtf", "0",
		"--billing", "off"}})
	e := newEnv(t, srv, "pro")
	r := mustCall(t, "POST", srv.API+"/voices/"+e.voice+"/speak", map[string]any{"text": "One. Two."}, keyHdr(e.key)...)
	if r.status != 200 {
		t.Fatalf("speak: %d %.300s", r.status, r.body)
	}
	for _, name := range []string{"voicesvc_engine_requests", "voicesvc_engine_queue_depth", "voicesvc_engine_refusing"} {
		r := mustCall(t, "GET", srv.URL+"/metrics", nil)
		if !hasSeries(string(r.body), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if n := metricSum(t, srv, "voicesvc_engine_requests_total"); n < 1 {
		t.Errorf("voicesvc_engine_requests_total: %v, want at least 1", n)
	}
	if n := metricSum(t, srv, "voicesvc_engine_sentences_total"); n < 2 {
		t.Errorf("voicesvc_engine_sentences_total: %v, want at least 2", n)
	}
}

func hasSeries(metrics, name string) bool {
	return strings.Contains(metrics, "\n"+name+"{") || strings.Contains(metrics, "\n"+name+" ")
}
