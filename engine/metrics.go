package engine

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes the pool's state and counters as Prometheus series,
// read from Stats at each scrape: the request path pays nothing for them.
// The engine label is the pool's engine name.
func (p *Pool) Collector() prometheus.Collector {
	return &poolCollector{p: p, engine: p.Name()}
}

var (
	poolWorkers = prometheus.NewDesc("voicesvc_engine_workers",
		"Live engine workers of the pool.", []string{"engine"}, nil)
	poolQueue = prometheus.NewDesc("voicesvc_engine_queue_depth",
		"Admitted requests waiting for a worker to take their next sentence.", []string{"engine"}, nil)
	poolRequests = prometheus.NewDesc("voicesvc_engine_requests",
		"Admitted engine requests not yet finished (queued, rendering or delivering).", []string{"engine"}, nil)
	poolActive = prometheus.NewDesc("voicesvc_engine_active_sentences",
		"Sentences held by workers now.", []string{"engine"}, nil)
	poolFinished = prometheus.NewDesc("voicesvc_engine_requests_total",
		"Engine requests by result: completed, cancelled, failed, rejected (queue full), refused (at capacity, new requests and checks before a realtime session or context opens).", []string{"engine", "result"}, nil)
	poolRestarts = prometheus.NewDesc("voicesvc_engine_worker_restarts_total",
		"Workers replaced after dying.", []string{"engine"}, nil)
	poolSentences = prometheus.NewDesc("voicesvc_engine_sentences_total",
		"Sentences synthesized.", []string{"engine"}, nil)
	poolBehind = prometheus.NewDesc("voicesvc_engine_behind_seconds",
		"How late a new request arriving now would start: the predicted wait or the lag of the most overdue sentence, the larger.", []string{"engine"}, nil)
	poolRefusing = prometheus.NewDesc("voicesvc_engine_refusing",
		"1 while the pool refuses new requests for capacity (503 upstream_busy), else 0.", []string{"engine"}, nil)
	poolCapacity = prometheus.NewDesc("voicesvc_engine_capacity_audio_seconds",
		"Audio seconds a second the workers render with all of them busy, as learned under the recent load (0 until learned).", []string{"engine"}, nil)
	poolWait = prometheus.NewDesc("voicesvc_engine_queue_wait_seconds",
		"Time an admitted request waited for a worker to take its first sentence.", []string{"engine"}, nil)
)

type poolCollector struct {
	p      *Pool
	engine string
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolWorkers, poolQueue, poolRequests, poolActive, poolFinished,
		poolRestarts, poolSentences, poolWait, poolBehind, poolRefusing, poolCapacity} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.Stats()
	e := c.engine
	gauge := func(d *prometheus.Desc, v int) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), e)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{e}, labels...)...)
	}
	gauge(poolWorkers, s.Workers)
	gauge(poolQueue, s.Queued)
	gauge(poolRequests, s.Requests)
	gauge(poolActive, s.Active)
	counter(poolFinished, s.Completed, "completed")
	counter(poolFinished, s.Cancelled, "cancelled")
	counter(poolFinished, s.Failed, "failed")
	counter(poolFinished, s.Rejected, "rejected")
	counter(poolFinished, s.Refused, "refused")
	refusing := 0.0
	if s.Refusing {
		refusing = 1
	}
	ch <- prometheus.MustNewConstMetric(poolBehind, prometheus.GaugeValue, s.Behind.Seconds(), e)
	ch <- prometheus.MustNewConstMetric(poolRefusing, prometheus.GaugeValue, refusing, e)
	ch <- prometheus.MustNewConstMetric(poolCapacity, prometheus.GaugeValue, s.Capacity, e)
	counter(poolRestarts, s.Restarts)
	counter(poolSentences, s.Sentences)
	buckets := make(map[float64]uint64, len(WaitBuckets))
	var n uint64
	for i, b := range WaitBuckets {
		n += s.Wait.Counts[i]
		buckets[b] = n
	}
	n += s.Wait.Counts[len(WaitBuckets)]
	ch <- prometheus.MustNewConstHistogram(poolWait, n, s.Wait.Sum.Seconds(), buckets, e)
}

// WaitBuckets are the upper bounds, in seconds, of PoolStats.Wait: a
// sentence takes milliseconds, so a wait of a second is a deep queue.
var WaitBuckets = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}

// WaitHistogram counts waits per bucket of WaitBuckets (Counts[len] is
// the waits above the last bound) with their total.
type WaitHistogram struct {
	Counts [len(WaitBuckets) + 1]uint64
	Sum    time.Duration
}

func (h *WaitHistogram) observe(d time.Duration) {
	s := d.Seconds()
	i := 0
	for i < len(WaitBuckets) && s > WaitBuckets[i] {
		i++
	}
	h.Counts[i]++
	h.Sum += d
}
