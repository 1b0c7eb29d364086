package telemetry

import (
	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/engine"
)

// collectingEngine is an engine that exposes its own series, read at each
// scrape: the pool its queue depth, wait and worker restarts; an upstream
// engine its replicas' state, requests and errors by class.
type collectingEngine interface{ Collector() prometheus.Collector }

// RegisterEngines registers the series of every engine of reg (the
// built-in one and the upstream engines) that has any, as one collector:
// engines of one kind describe the same series (the engine is a label), and
// a registry refuses a second collector that describes them again.
func RegisterEngines(r *prometheus.Registry, reg *engine.Registry) error {
	if reg == nil {
		return nil
	}
	all := reg.Others()
	if b := reg.Builtin(); b != nil {
		all = append([]engine.Engine{b}, all...)
	}
	var cs engineCollectors
	for _, e := range all {
		if c, ok := e.(collectingEngine); ok {
			cs = append(cs, c.Collector())
		}
	}
	if len(cs) == 0 {
		return nil
	}
	return r.Register(cs)
}

// engineCollectors collects every engine's series; each description once.
type engineCollectors []prometheus.Collector

func (cs engineCollectors) Describe(ch chan<- *prometheus.Desc) {
	seen := map[*prometheus.Desc]bool{}
	for _, c := range cs {
		descs := make(chan *prometheus.Desc, 16)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			if !seen[d] {
				seen[d] = true
				ch <- d
			}
		}
	}
}

func (cs engineCollectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
