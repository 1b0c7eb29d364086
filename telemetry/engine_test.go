package telemetry

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/engine/upstream"
)

// The pool and two upstream engines register together (the upstreams
// describe the same series) and each engine's series are served.
func TestEngineMetricsOfEveryEngine(t *testing.T) {
	pool, err := engine.NewPool(engine.PoolOptions{Engine: reference.New(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	others := []engine.Engine{}
	for _, name := range []string{"up1", "up2"} {
		e, err := upstream.New(upstream.Config{Name: name, Type: "openai", URLs: []string{"http://127.0.0.1:1/v1"},
			Model: "m", Timeout: time.Second, MaxWait: time.Second,
			Voices: []upstream.Voice{{Alias: name + "-a", Voice: "a", Language: "en"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		others = append(others, e)
	}
	reg, err := engine.NewRegistry(pool, others...)
	if err != nil {
		t.Fatal(err)
	}
	r := prometheus.NewPedanticRegistry()
	if err := RegisterEngines(r, reg); err != nil {
		t.Fatal(err)
	}
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]map[string]bool{}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "engine" {
					if engines[mf.GetName()] == nil {
						engines[mf.GetName()] = map[string]bool{}
					}
					engines[mf.GetName()][l.GetValue()] = true
				}
			}
		}
	}
	if got := engines["voicesvc_upstream_up"]; !got["up1"] || !got["up2"] || len(got) != 2 {
		t.Errorf("voicesvc_upstream_up engines %v, want up1 and up2", got)
	}
	if got := engines["voicesvc_engine_queue_depth"]; !got[pool.Name()] || len(got) != 1 {
		t.Errorf("voicesvc_engine_queue_depth engines %v, want %s", got, pool.Name())
	}
}
