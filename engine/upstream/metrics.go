package upstream

import "github.com/prometheus/client_golang/prometheus"

// Collector exposes each replica's state and totals (Replicas) as
// Prometheus series, read at each scrape. Labels: the engine's name and
// the replica's configured URL (password hidden): both fixed by the
// configuration, so the label set is bounded.
func (e *Engine) Collector() prometheus.Collector {
	return &replicaCollector{e: e}
}

var (
	replicaUp = prometheus.NewDesc("voicesvc_upstream_up",
		"1 while the replica takes requests, 0 while it is ejected.", []string{"engine", "replica"}, nil)
	replicaOutstanding = prometheus.NewDesc("voicesvc_upstream_outstanding",
		"Requests holding a slot of the replica now.", []string{"engine", "replica"}, nil)
	replicaRequests = prometheus.NewDesc("voicesvc_upstream_requests_total",
		"Attempts sent to the replica (one per sentence and attempt; a retry counts on the replica that took it).",
		[]string{"engine", "replica"}, nil)
	replicaRetries = prometheus.NewDesc("voicesvc_upstream_retries_total",
		"Attempts that retried on this replica a sentence that failed on another before any audio.",
		[]string{"engine", "replica"}, nil)
	replicaStale = prometheus.NewDesc("voicesvc_upstream_stale_retries_total",
		"Attempts resent at once because a kept-alive connection to the replica turned out closed.",
		[]string{"engine", "replica"}, nil)
	replicaFailures = prometheus.NewDesc("voicesvc_upstream_failures_total",
		"Failed attempts, every class (voicesvc_upstream_errors_total splits them).", []string{"engine", "replica"}, nil)
	replicaErrors = prometheus.NewDesc("voicesvc_upstream_errors_total",
		"Failed attempts by class: busy (429, 503, refused), invalid (400, 404, 413, 422), upstream (the rest).",
		[]string{"engine", "replica", "class"}, nil)
	replicaEjections = prometheus.NewDesc("voicesvc_upstream_ejections_total",
		"Times the replica was ejected after consecutive failures.", []string{"engine", "replica"}, nil)
)

type replicaCollector struct{ e *Engine }

func (c *replicaCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replicaUp, replicaOutstanding, replicaRequests, replicaRetries,
		replicaStale, replicaFailures, replicaErrors, replicaEjections} {
		ch <- d
	}
}

func (c *replicaCollector) Collect(ch chan<- prometheus.Metric) {
	name := c.e.Name()
	for _, r := range c.e.Replicas() {
		up := 0.0
		if r.State == "up" {
			up = 1
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name, r.URL)
		}
		counter := func(d *prometheus.Desc, v uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v),
				append([]string{name, r.URL}, labels...)...)
		}
		gauge(replicaUp, up)
		gauge(replicaOutstanding, float64(r.Outstanding))
		counter(replicaRequests, r.Requests)
		counter(replicaRetries, r.Retries)
		counter(replicaStale, r.StaleRetries)
		counter(replicaFailures, r.ErrorsBusy+r.ErrorsInvalid+r.ErrorsUpstream)
		counter(replicaErrors, r.ErrorsBusy, "busy")
		counter(replicaErrors, r.ErrorsInvalid, "invalid")
		counter(replicaErrors, r.ErrorsUpstream, "upstream")
		counter(replicaEjections, r.Ejections)
	}
}
