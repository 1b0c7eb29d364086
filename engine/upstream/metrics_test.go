package upstream

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The collector reports each replica's state, requests and errors by class
// from Replicas, under bounded labels (engine, configured URL, class).
func TestCollector(t *testing.T) {
	f := newFixture(t)
	busy := true
	f.before = func(w http.ResponseWriter, _ *http.Request, _ speechBody) bool {
		if busy {
			busy = false
			w.WriteHeader(http.StatusBadRequest) // one invalid-input failure
			return true
		}
		return false
	}
	e := newEngine(t, []string{f.srv.URL}, nil)
	if _, err := speak(context.Background(), e, "Refused first.", time.Time{}); err == nil {
		t.Fatal("the 400 should fail the request")
	}
	if _, err := speak(context.Background(), e, "Hello there.", time.Time{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				if l.GetName() == "replica" && l.GetValue() != f.srv.URL {
					t.Errorf("%s: replica label %q, want the configured URL", key, l.GetValue())
				}
				if l.GetName() == "class" {
					key += "/" + l.GetValue()
				}
			}
			got[key] = value(m)
		}
	}
	want := map[string]float64{
		"voicesvc_upstream_up":                    1,
		"voicesvc_upstream_failures_total":        1,
		"voicesvc_upstream_retries_total":         0,
		"voicesvc_upstream_stale_retries_total":   0,
		"voicesvc_upstream_outstanding":           0,
		"voicesvc_upstream_requests_total":        2,
		"voicesvc_upstream_errors_total/invalid":  1,
		"voicesvc_upstream_errors_total/busy":     0,
		"voicesvc_upstream_errors_total/upstream": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	ped := prometheus.NewPedanticRegistry()
	ped.MustRegister(e.Collector())
	if _, err := ped.Gather(); err != nil {
		t.Fatalf("pedantic: %v", err)
	}
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	return -1
}
