// Package telemetry holds the Prometheus series of the synthesis path and
// the store (docs/api.md#metrics), and the decorators that count the
// limiter, the meter and the store for them. It knows no protocol: the
// server and each protocol package resolve their series here once.
package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/control"
)

// Synthesis series (docs/api.md#metrics). Labels are bounded: transport
// (speak, sse, compat, websocket), engine (the configured engines' names),
// outcome and code (the error codes of control/error.go), store method.
// Never a workspace, voice or request id. Each transport resolves its
// series once (transportSeries), so a request does no label lookup on the
// success path.

// Transports, the values of the transport label: how the audio leaves.
const (
	Speak     = "speak"
	SSE       = "sse"
	Compat    = "compat"
	WebSocket = "websocket"
)

// Dialects, the values of the dialect label: whose protocol the request
// spoke (beside transport, so existing queries by transport keep working).
const (
	Native   = "native"
	OpenAI   = "openai"
	Cartesia = "cartesia"
	Deepgram = "deepgram"
)

// synthMetrics are the series of the synthesis path, registered with the
// server's registry in initSynthesis.
type Synth struct {
	ttfa     *prometheus.HistogramVec
	duration *prometheus.HistogramVec
	// Sessions and Contexts count the open realtime sessions and contexts.
	Sessions prometheus.Gauge
	Contexts prometheus.Gauge
	// Outcomes is voicesvc_synth_total{transport, outcome, dialect}.
	Outcomes *prometheus.CounterVec
	billed   *prometheus.CounterVec // labels: none, or workspace
	refunded *prometheus.CounterVec
	refusals *prometheus.CounterVec // code, and workspace
	store    *prometheus.HistogramVec
	// byWorkspace: the billing and refusal series carry a workspace label
	// (Config.MetricsWorkspaceLabel); otherwise their children without it
	// are resolved once.
	byWorkspace          bool
	billedAll, refundAll prometheus.Counter

	mu          sync.Mutex
	byTransport map[seriesKey]*Series
}

type seriesKey struct{ dialect, transport string }

// Series are one dialect's and transport's series, resolved once.
type Series struct {
	dialect, transport string
	// Duration observes a synthesis's time from its request to its end.
	Duration prometheus.Observer
	ok       prometheus.Counter
	outcomes *prometheus.CounterVec
	// ttfa by engine name: engines are few and fixed at start, so the
	// first request on each resolves its child and the rest load it.
	ttfa sync.Map // engine name -> prometheus.Observer
	vec  *prometheus.HistogramVec
}

// Dialect and Transport are the series' labels.
func (t *Series) Dialect() string   { return t.dialect }
func (t *Series) Transport() string { return t.transport }

// FirstAudio observes the time to a synthesis's first audio on engine.
func (t *Series) FirstAudio(engine string, d time.Duration) {
	o, ok := t.ttfa.Load(engine)
	if !ok {
		o, _ = t.ttfa.LoadOrStore(engine, t.vec.WithLabelValues(t.transport, engine, t.dialect))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// Outcome counts a finished synthesis (WebSocket: a context) by outcome:
// "ok", "client_gone" or the error code.
func (t *Series) Outcome(outcome string) {
	if outcome == "ok" {
		t.ok.Inc()
		return
	}
	t.outcomes.WithLabelValues(t.transport, outcome, t.dialect).Inc()
}

// latencyBuckets: from a cache hit to a long text on a slow engine.
var latencyBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// NewSynth makes the synthesis series; byWorkspace adds a workspace label
// to the billing and refusal series (one series per workspace).
func NewSynth(byWorkspace bool) *Synth {
	var ws []string
	if byWorkspace {
		ws = []string{"workspace"}
	}
	m := &Synth{byWorkspace: byWorkspace,
		Outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "voicesvc_synth_total",
			Help: "Finished syntheses (WebSocket: contexts) by transport, dialect and outcome: ok, client_gone or the error code.",
		}, []string{"transport", "outcome", "dialect"}),
		ttfa: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voicesvc_time_to_first_audio_seconds",
			Help: "Time from the request (HTTP) or the context's first text (WebSocket) to its first audio " +
				"handed to the connection, by transport and engine. A buffered answer (wav, replayable speak) " +
				"counts when the whole body is ready.",
			Buckets: latencyBuckets,
		}, []string{"transport", "engine", "dialect"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "voicesvc_synth_duration_seconds",
			Help: "Time from the request to the end of its synthesis (the last audio handed to the connection, " +
				"or the failure), by transport; unlike voicesvc_http_request_duration_seconds it includes a " +
				"streamed body. WebSocket: per context, from its first text to task_done or its end.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"transport", "dialect"}),
		Sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "voicesvc_realtime_sessions",
			Help: "Open realtime WebSocket sessions.",
		}),
		Contexts: prometheus.NewGauge(prometheus.GaugeOpts{
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
		byTransport: make(map[seriesKey]*Series),
	}
	for _, t := range []string{Speak, SSE, WebSocket} {
		m.Series(Native, t)
	}
	m.Series(OpenAI, Compat)
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

// Collectors are the series to register.
func (m *Synth) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Outcomes, m.ttfa, m.duration, m.Sessions, m.Contexts, m.billed, m.refunded, m.refusals, m.store}
}

// Store is the histogram of store calls, by method (NewTimedStore).
func (m *Synth) Store() *prometheus.HistogramVec { return m.store }

// Series are the series of one dialect's transport, made on first use
// (protocol packages resolve theirs once, at registration).
func (m *Synth) Series(dialect, transport string) *Series {
	k := seriesKey{dialect, transport}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.byTransport[k]; t != nil {
		return t
	}
	t := &Series{dialect: dialect, transport: transport, vec: m.ttfa, outcomes: m.Outcomes,
		Duration: m.duration.WithLabelValues(transport, dialect), ok: m.Outcomes.WithLabelValues(transport, "ok", dialect)}
	m.byTransport[k] = t
	return t
}

var refusalCodes = []string{control.ERateLimited, control.EConcurrencyLimited, control.ETooManySessions,
	control.EQuotaExhausted, control.EInsufficientCredits, control.EFeatureDisabled}

// Refused counts err when it is a limit or billing refusal of workspace ws.
func (m *Synth) Refused(ws string, err error) {
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
func (m *Synth) bill(ws string, n int64, refund bool) {
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

// CountingLimiter counts the limiter's refusals.
func (m *Synth) CountingLimiter(l control.Limiter) control.Limiter { return countingLimiter{l, m} }

type countingLimiter struct {
	control.Limiter
	m *Synth
}

func (l countingLimiter) AllowRequest(ctx context.Context, ws string, rps int) (control.RateDecision, error) {
	d, err := l.Limiter.AllowRequest(ctx, ws, rps)
	if err != nil || !d.Allowed {
		if err == nil {
			err = control.RateLimited(d)
		}
		l.m.Refused(ws, err)
	}
	return d, err
}

func (l countingLimiter) Acquire(ctx context.Context, ws, kind string, limit int) (control.Lease, int, error) {
	lease, free, err := l.Limiter.Acquire(ctx, ws, kind, limit)
	if err != nil {
		l.m.Refused(ws, err)
	}
	return lease, free, err
}

// CountingMeter counts the characters charged and refunded, and billing's
// refusals. Every transport (the WebSocket sessions too) bills through it.
func (m *Synth) CountingMeter(mt control.Meter) control.Meter { return countingMeter{mt, m} }

type countingMeter struct {
	control.Meter
	m *Synth
}

func (c countingMeter) Charge(ctx context.Context, ws *control.Workspace, chars int64) (control.Charge, int64, error) {
	ch, rem, err := c.Meter.Charge(ctx, ws, chars)
	if err != nil {
		c.m.Refused(ws.ID, err)
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
