package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// dyingWorker dies on its first sentence, before any audio, then renders.
type dyingWorker struct {
	engine.Worker
	died *atomic.Bool
}

func (w dyingWorker) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	if w.died.CompareAndSwap(false, true) {
		return engine.ErrWorkerDied
	}
	return w.Worker.Synthesize(ctx, req, emit)
}

// The pool's collector reads Stats: a request that waited for a worker, a
// worker restarted once, completed requests, the queue's gauges.
func TestPoolCollector(t *testing.T) {
	ref := reference.New()
	var died atomic.Bool
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 1, NewWorker: func(int) (engine.Worker, error) {
		return dyingWorker{engine.InProcess(ref), &died}, nil
	}})
	for _, req := range requests(3) {
		if _, err := collect(context.Background(), p, req); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(p.Collector())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.Metric{}
	for _, mf := range fams {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "engine":
					if l.GetValue() != ref.Name() {
						t.Errorf("%s: engine %q", key, l.GetValue())
					}
				default:
					key += "/" + l.GetValue()
				}
			}
			got[key] = m
		}
	}
	for name, want := range map[string]float64{
		"voicesvc_engine_worker_restarts_total":    1,
		"voicesvc_engine_requests_total/completed": 3,
		"voicesvc_engine_requests_total/rejected":  0,
		"voicesvc_engine_requests_total/refused":   0,
		"voicesvc_engine_refusing":                 0,
		"voicesvc_engine_behind_seconds":           0,
		"voicesvc_engine_workers":                  1,
		"voicesvc_engine_queue_depth":              0,
		"voicesvc_engine_requests":                 0,
	} {
		m := got[name]
		if m == nil {
			t.Errorf("%s missing", name)
			continue
		}
		v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
		if v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if h := got["voicesvc_engine_queue_wait_seconds"].GetHistogram(); h.GetSampleCount() != 3 {
		t.Errorf("queue wait: %d samples, want one per request (3)", h.GetSampleCount())
	}
}
