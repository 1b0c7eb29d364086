package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"voicesvc/control"
	"voicesvc/synth"
)

// Synthesis series (docs/api.md#metrics). Labels are bounded: transport
// (speak, sse, compat, websocket), engine (the configured engines' names),
// outcome and code (the error codes of control/error.go), store method.
// Never a workspace, voice or request id. Each transport resolves its
// series once (transportSeries), so a request does no label lookup on the
// success path.

// Transports, the values of the transport label.
const (
	transportSpeak     = "speak"
	transportSSE       = "sse"
	transportCompat    = "compat"
	transportWebSocket = "websocket"
)

var transports = []string{transportSpeak, transportSSE, transportCompat, transportWebSocket}

// synthMetrics are the series of the synthesis path, registered with the
// server's registry in initSynthesis.
type synthMetrics struct {
	ttfa     *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	sessions prometheus.Gauge
	contexts prometheus.Gauge
	billed   *prometheus.CounterVec // labels: none, or workspace
	refunded *prometheus.CounterVec
	refusals *prometheus.CounterVec // code, and workspace
	store    *prometheus.HistogramVec
	// byWorkspace: the billing and refusal series carry a workspace label
	// (Config.MetricsWorkspaceLabel); otherwise their children without it
	// are resolved once.
	byWorkspace          bool
	billedAll, refundAll prometheus.Counter

	byTransport map[string]*transportSeries
}

// transportSeries are one transport's series, resolved once.
type transportSeries struct {
	name     string
	duration prometheus.Observer
	ok       prometheus.Counter
	// ttfa by engine name: engines are few and fixed at start, so the
	// first request on each resolves its child and the rest load it.
	ttfa sync.Map // engine name -> prometheus.Observer
	vec  *prometheus.HistogramVec
}

func (t *transportSeries) firstAudio(engine string, d time.Duration) {
	o, ok := t.ttfa.Load(engine)
	if !ok {
		o, _ = t.ttfa.LoadOrStore(engine, t.vec.WithLabelValues(t.name, engine))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// latencyBuckets: from a cache hit to a long text on a slow engine.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

func newSynthMetrics(outcomes *prometheus.CounterVec, byWorkspace bool) *synthMetrics {
	var ws []string
	if byWorkspace {
		ws = []string{"workspace"}
	}
	m := &synthMetrics{byWorkspace: byWorkspace,
		ttfa: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voicesvc_time_to_first_audio_seconds",
			Help: "Time from the request (HTTP) or the context's first text (WebSocket) to its first audio " +
				"handed to the connection, by transport and engine. A buffered answer (wav, replayable speak) " +
				"counts when the whole body is ready.",
			Buckets: latencyBuckets,
		}, []string{"transport", "engine"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voicesvc_synth_duration_seconds",
			Help: "Time from the request to the end of its synthesis (the last audio handed to the connection, " +
				"or the failure), by transport; unlike voicesvc_http_request_duration_seconds it includes a " +
				"streamed body. WebSocket: per context, from its first text to task_done or its end.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"transport"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voicesvc_realtime_sessions",
			Help: "Open realtime WebSocket sessions.",
		}),
		contexts: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voicesvc_realtime_contexts",
			Help: "Open contexts of the realtime WebSocket sessions.",
		}),
		billed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voicesvc_billed_characters_total",
			Help: "Characters charged to workspaces, all transports, before refunds; billing off charges none.",
		}, ws),
		refunded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voicesvc_refunded_characters_total",
			Help: "Characters refunded: charged for a synthesis that produced no audio.",
		}, ws),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voicesvc_limit_refusals_total",
			Help: "Requests and syntheses refused by a limit or by billing, by error code.",
		}, append([]string{"code"}, ws...)),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "voicesvc_store_duration_seconds",
			Help:    "Time of each store call, by method, errors included.",
			Buckets: []float64{0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5},
		}, []string{"method"}),
		byTransport: make(map[string]*transportSeries, len(transports)),
	}
	for _, t := range transports {
		m.byTransport[t] = &transportSeries{name: t, vec: m.ttfa,
			duration: m.duration.WithLabelValues(t), ok: outcomes.WithLabelValues(t, "ok")}
	}
	if byWorkspace {
		return m
	}
	m.billedAll, m.refundAll = m.billed.WithLabelValues(), m.refunded.WithLabelValues()
	// The refusal codes exist from the start, at 0, so that rate() sees
	// their first refusal.
	for _, c := range refusalCodes {
		m.refusals.WithLabelValues(c)
	}
	return m
}

func (m *synthMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.ttfa, m.duration, m.sessions, m.contexts, m.billed, m.refunded, m.refusals, m.store}
}

// series is the transport's resolved series.
func (m *synthMetrics) series(transport string) *transportSeries {
	if t := m.byTransport[transport]; t != nil {
		return t
	}
	return m.byTransport[transportSpeak] // unreachable: transports are constants
}

var refusalCodes = []string{control.ERateLimited, control.EConcurrencyLimited, control.ETooManySessions,
	control.EQuotaExhausted, control.EInsufficientCredits, control.EFeatureDisabled}

// refused counts err when it is a limit or billing refusal of workspace ws.
func (m *synthMetrics) refused(ws string, err error) {
	c := control.ErrorCode(err)
	for _, r := range refusalCodes {
		if c != r {
			continue
		}
		if m.byWorkspace {
			m.refusals.WithLabelValues(c, ws).Inc()
		} else {
			m.refusals.WithLabelValues(c).Inc()
		}
		return
	}
}

// bill counts n characters charged to ws (refund: given back).
func (m *synthMetrics) bill(ws string, n int64, refund bool) {
	switch {
	case m.byWorkspace && refund:
		m.refunded.WithLabelValues(ws).Add(float64(n))
	case m.byWorkspace:
		m.billed.WithLabelValues(ws).Add(float64(n))
	case refund:
		m.refundAll.Add(float64(n))
	default:
		m.billedAll.Add(float64(n))
	}
}

// countingLimiter counts the limiter's refusals.
type countingLimiter struct {
	control.Limiter
	m *synthMetrics
}

func (l countingLimiter) AllowRequest(ctx context.Context, ws string, rps int) (control.RateDecision, error) {
	d, err := l.Limiter.AllowRequest(ctx, ws, rps)
	if err != nil || !d.Allowed {
		if err == nil {
			err = control.RateLimited(d)
		}
		l.m.refused(ws, err)
	}
	return d, err
}

func (l countingLimiter) Acquire(ctx context.Context, ws, kind string, limit int) (control.Lease, int, error) {
	lease, free, err := l.Limiter.Acquire(ctx, ws, kind, limit)
	if err != nil {
		l.m.refused(ws, err)
	}
	return lease, free, err
}

// countingMeter counts the characters charged and refunded, and billing's
// refusals. Every transport (the WebSocket sessions too) bills through it.
type countingMeter struct {
	control.Meter
	m *synthMetrics
}

func (c countingMeter) Charge(ctx context.Context, ws *control.Workspace, chars int64) (control.Charge, int64, error) {
	ch, rem, err := c.Meter.Charge(ctx, ws, chars)
	if err != nil {
		c.m.refused(ws.ID, err)
	} else if n := ch.FromAllowance + ch.FromCredits; n > 0 {
		c.m.bill(ws.ID, n, false) // billing off takes nothing: a zero Charge
	}
	return ch, rem, err
}

func (c countingMeter) Refund(ctx context.Context, ch control.Charge) error {
	err := c.Meter.Refund(ctx, ch)
	if n := ch.FromAllowance + ch.FromCredits; err == nil && n > 0 {
		c.m.bill(ch.WorkspaceID, n, true)
	}
	return err
}

// firstAudio records a streamed synthesis's first audio, handed to the
// connection now: voicesvc_time_to_first_audio_seconds and, when traced,
// the engine.queue and first_audio spans.
func (s *Server) firstAudio(job *synthJob, transport string, synthStart time.Time) {
	now := time.Now()
	s.synth.m.series(transport).firstAudio(job.Engine.Name(), now.Sub(job.start))
	if s.tracer != nil {
		job.tr.rs.childSpan(s.tracer, "engine.queue", synthStart, now, nil)
		job.tr.rs.childSpan(s.tracer, "first_audio", job.start, now, nil)
	}
}

// streamEnded records the end of a streamed synthesis: its duration, and
// the end of the request's span.
func (s *Server) streamEnded(job *synthJob, transport string, err error) {
	s.synth.m.series(transport).duration.Observe(time.Since(job.start).Seconds())
	if job.tr.rs != nil {
		s.endStreamSpan(job.tr.rs, err)
	}
}

// synthEnded records a buffered synthesis: the body is whole now, so its
// first audio and its end are both now.
func (s *Server) synthEnded(job *synthJob, transport string, first *firstChunk, err error) {
	now := time.Now()
	ok := err == nil
	ts := s.synth.m.series(transport)
	d := now.Sub(job.start)
	ts.duration.Observe(d.Seconds())
	if ok {
		ts.firstAudio(job.Engine.Name(), d)
	}
	if s.tracer != nil {
		if first != nil && !first.at.IsZero() {
			job.tr.rs.childSpan(s.tracer, "engine.queue", first.start, first.at, nil)
		}
		if ok {
			job.tr.rs.childSpan(s.tracer, "first_audio", job.start, now, nil)
		}
		if err != nil && job.tr.rs != nil {
			job.tr.rs.span.SetAttributes(attribute.String("voicesvc.outcome", outcomeOf(err)))
		}
	}
}

// firstChunk times a buffered synthesis's first audio, for its spans. Made
// only when traced: a sink that records it is a closure over it.
type firstChunk struct{ start, at time.Time }

func timeFirstChunk(sink synth.Sink) (*firstChunk, synth.Sink) {
	f := &firstChunk{start: time.Now()}
	return f, func(b []byte) error {
		if f.at.IsZero() {
			f.at = time.Now()
		}
		return sink(b)
	}
}
