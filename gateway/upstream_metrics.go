package gateway

import (
	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/engine"
)

// engineCollector serves the replicas of the upstream engines on /metrics,
// read from the registry at each scrape: attempts, retries, failures,
// ejections and whether each replica is up.
type engineCollector struct {
	reg                                        *engine.Registry
	requests, retries, failures, ejections, up *prometheus.Desc
}

func newEngineCollector(reg *engine.Registry) *engineCollector {
	labels := []string{"engine", "replica"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &engineCollector{reg: reg,
		requests:  d("voicesvc_upstream_requests_total", "Requests sent to an upstream replica (one per sentence and attempt)."),
		retries:   d("voicesvc_upstream_retries_total", "Requests that retried on this replica a sentence that failed on another before any audio."),
		failures:  d("voicesvc_upstream_failures_total", "Requests to the replica that failed (busy, refused, invalid, cut, timed out)."),
		ejections: d("voicesvc_upstream_ejections_total", "Times the replica was ejected after consecutive failures."),
		up:        d("voicesvc_upstream_up", "1 while the replica takes requests, 0 while it is ejected."),
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.requests, c.retries, c.failures, c.ejections, c.up} {
		ch <- d
	}
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.reg.Statuses() {
		for _, r := range st.Replicas {
			up := 0.0
			if r.State == "up" {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(r.Requests), st.Name, r.URL)
			ch <- prometheus.MustNewConstMetric(c.retries, prometheus.CounterValue, float64(r.Retries), st.Name, r.URL)
			ch <- prometheus.MustNewConstMetric(c.failures, prometheus.CounterValue, float64(r.Failures), st.Name, r.URL)
			ch <- prometheus.MustNewConstMetric(c.ejections, prometheus.CounterValue, float64(r.Ejections), st.Name, r.URL)
			ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up, st.Name, r.URL)
		}
	}
}
