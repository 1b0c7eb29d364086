package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/control"
)

// NewTimedLimiter times the calls of a limiter that asks the shared store
// (Postgres's per-request limiter) in h, voicesvc_store_duration_seconds,
// as methods LimiterAllowRequest and LimiterAcquire: they are store round
// trips like any other, and the control-plane bench counts them per
// request. An in-process limiter is not wrapped: it makes no round trip.
func NewTimedLimiter(l control.Limiter, h *prometheus.HistogramVec) control.Limiter {
	return &timedLimiter{l: l, allow: h.WithLabelValues("LimiterAllowRequest"), acquire: h.WithLabelValues("LimiterAcquire")}
}

type timedLimiter struct {
	l              control.Limiter
	allow, acquire prometheus.Observer
}

func (t *timedLimiter) AllowRequest(ctx context.Context, ws string, rps int) (control.RateDecision, error) {
	start := time.Now()
	d, err := t.l.AllowRequest(ctx, ws, rps)
	t.allow.Observe(time.Since(start).Seconds())
	return d, err
}

func (t *timedLimiter) Acquire(ctx context.Context, ws, kind string, limit int) (control.Lease, int, error) {
	start := time.Now()
	lease, free, err := t.l.Acquire(ctx, ws, kind, limit)
	t.acquire.Observe(time.Since(start).Seconds())
	return lease, free, err
}
