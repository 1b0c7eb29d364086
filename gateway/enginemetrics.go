package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/engine"
)

// collectingEngine is an engine that exposes its own series, read at each
// scrape (the pool: queue depth, wait, worker restarts; an upstream
// engine: its replicas' state, requests and errors).
type collectingEngine interface{ Collector() prometheus.Collector }

// registerEngineMetrics registers the engine's series when it has any; an
// engine that holds others (a registry of engines) may expose theirs the
// same way.
func registerEngineMetrics(reg *prometheus.Registry, e engine.Engine) error {
	if c, ok := e.(collectingEngine); ok {
		return reg.Register(c.Collector())
	}
	return nil
}
