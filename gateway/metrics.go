package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
)

// metrics are the server's Prometheus series: requests by route and
// status, and latency by route. Routes resolve their series once at
// registration (see route.observe), so counting a request does no lookup.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	serve    fasthttp.RequestHandler
}

func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voicesvc_http_requests_total",
			Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voicesvc_http_request_duration_seconds",
			Help: "Time from the request's headers to the handler's return, by route. A streamed body " +
				"(speak in raw formats, SSE, compat) is sent after the return: voicesvc_synth_duration_seconds " +
				"measures those to their end.",
			// From a cache hit (tens of microseconds) to a long synthesis.
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30},
		}, []string{"route"}),
	}
	if err := reg.Register(m.requests); err != nil {
		return nil, err
	}
	if err := reg.Register(m.latency); err != nil {
		return nil, err
	}
	m.serve = fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return m, nil
}

// Registry is where other parts of the server (engine pool, limiter)
// register their metrics so that /metrics serves them too.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }
