package engine

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metered gives an engine that runs without the pool (the reference
// engine: --engine reference) the pool's voicesvc_engine_* series that
// apply to it, so that /metrics and the dashboard read the same with
// either engine: requests in progress, requests by result and sentences.
// Such an engine has no queue and never refuses for capacity, so its queue
// depth, refusing and behind series are 0 and it has no workers.
func Metered(e Engine) Engine { return &metered{Engine: e} }

type metered struct {
	Engine
	inFlight, completed, cancelled, failed, sentences atomic.Int64
}

func (m *metered) WordTimes() bool { return WordTimes(m.Engine) }

func (m *metered) Synthesize(ctx context.Context, req Request, emit func(Chunk) error) error {
	m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	err := m.Engine.Synthesize(ctx, req, func(c Chunk) error {
		if c.Last {
			m.sentences.Add(1)
		}
		return emit(c)
	})
	switch {
	case err == nil:
		m.completed.Add(1)
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		m.cancelled.Add(1)
	default:
		m.failed.Add(1)
	}
	return err
}

// Collector exposes the series; the engine label is the engine's name.
func (m *metered) Collector() prometheus.Collector { return meteredCollector{m} }

type meteredCollector struct{ m *metered }

func (c meteredCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{poolWorkers, poolQueue, poolRequests, poolActive, poolFinished,
		poolSentences, poolBehind, poolRefusing} {
		ch <- d
	}
}

func (c meteredCollector) Collect(ch chan<- prometheus.Metric) {
	m, e := c.m, c.m.Name()
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), e)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{e}, labels...)...)
	}
	n := m.inFlight.Load()
	gauge(poolWorkers, 0)
	gauge(poolQueue, 0)
	gauge(poolRequests, n)
	gauge(poolActive, n) // every request in progress is rendering its sentence
	counter(poolFinished, m.completed.Load(), "completed")
	counter(poolFinished, m.cancelled.Load(), "cancelled")
	counter(poolFinished, m.failed.Load(), "failed")
	counter(poolFinished, 0, "rejected")
	counter(poolFinished, 0, "refused")
	counter(poolSentences, m.sentences.Load())
	gauge(poolBehind, 0)
	gauge(poolRefusing, 0)
}
