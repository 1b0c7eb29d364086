package gateway

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Admission: the limits and billing every request and every synthesis pass
// (docs/api.md#limits, #plans). Two steps, in this order:
//
//  1. admitRequest, in the route wrapper for every authenticated API request
//     (speak, stream, compat, WebSocket handshakes, job polling, tokens...):
//     the workspace's requests-per-second budget, and the RateLimit-Policy
//     and RateLimit headers. 429 rate_limited with Retry-After.
//  2. admit, in every synthesis transport after its own validation (body,
//     voice, language: a request refused for those takes neither a slot nor
//     a charge): the streaming feature (streaming transports, billing
//     enforced: 403 flat feature_disabled), one concurrency slot (429
//     concurrency_limited with Retry-After), then the charge for the text's
//     characters (402 flat quota_exhausted / insufficient_credits). A refusal
//     at any step undoes the steps before it: a refused request holds no
//     slot and is never billed.
//
// The transport then synthesizes and calls Admission.Done with the samples
// it produced: no audio refunds the charge; Done always frees the slot. The
// slot is held until the audio is out or the client is gone (speak: the
// body is built or streamed; SSE: the last event is handed to the response;
// WebSocket: from the handshake until the socket closes).

// synthState is the server's synthesis machinery (Server.synth).
type synthState struct {
	meter control.Meter
	// consumeToken, when set, marks the access token of p used. admit calls
	// it last, once the request is certain to run, so that a request refused
	// by a limit or billing leaves the token valid (docs/api.md#access-tokens). An error
	// (401 token_invalid when another use won) refuses the request: its
	// charge is refunded and its slot freed. Set by tokens.go.
	consumeToken func(ctx context.Context, p *control.Principal) error

	active   prometheus.Gauge
	outcomes *prometheus.CounterVec
	m        *synthMetrics // synthmetrics.go
}

// initSynthesis fills the synthesis defaults: an in-process limiter when
// none is given (one server on SQLite) and the store's meter at the
// server's billing mode.
func (s *Server) initSynthesis(deps Deps) error {
	s.synth.active = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "voicesvc_synth_active",
		Help: "Admitted syntheses holding a concurrency slot, all transports.",
	})
	s.synth.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "voicesvc_synth_total",
		Help: "Finished syntheses (WebSocket: contexts) by transport and outcome: ok, client_gone or the error code.",
	}, []string{"transport", "outcome"})
	m := newSynthMetrics(s.synth.outcomes, s.cfg.MetricsWorkspaceLabel)
	s.synth.m = m
	// The store, the limiter and the meter are timed and counted where the
	// server holds them (synthmetrics.go, storemetrics.go).
	s.store = newTimedStore(s.store, m.store)
	if s.limiter == nil {
		s.limiter = control.NewMemoryLimiter()
	}
	s.limiter = countingLimiter{Limiter: s.limiter, m: m}
	s.synth.meter = deps.Meter
	if s.synth.meter == nil {
		s.synth.meter = control.NewMeter(s.store, deps.Billing)
	}
	s.synth.meter = countingMeter{Meter: s.synth.meter, m: m}
	for _, c := range append([]prometheus.Collector{s.synth.active, s.synth.outcomes}, m.collectors()...) {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return registerEngineMetrics(s.metrics.reg, s.engines)
}

// limitTimeout bounds one limiter or meter call (a store round trip with
// Postgres).
const limitTimeout = 5 * time.Second

var (
	hdrRateLimit       = []byte("RateLimit")
	hdrRateLimitPolicy = []byte("RateLimit-Policy")
	hdrBillingRemain   = []byte("X-Billing-Remaining")
)

// admitRequest counts one request against p's workspace and stamps the
// RateLimit-Policy and RateLimit headers of docs/api.md#limits, on refusals too.
// Plans without a request rate get no rps items and no limiter call.
func (s *Server) admitRequest(ctx *fasthttp.RequestCtx, p *control.Principal) error {
	l := &p.Limits
	var buf [96]byte
	if b := appendPolicy(buf[:0], l); len(b) > 0 {
		ctx.Response.Header.SetCanonical(hdrRateLimitPolicy, b)
	}
	if l.RPS <= 0 {
		return nil
	}
	c, cancel := context.WithTimeout(context.Background(), limitTimeout)
	d, err := s.limiter.AllowRequest(c, p.WorkspaceID, l.RPS)
	cancel()
	if d.Limit > 0 {
		ctx.Response.Header.SetCanonical(hdrRateLimit, appendRPSItem(buf[:0], d))
	}
	if err == nil && !d.Allowed {
		err = control.RateLimited(d) // a limiter that refused without an error
	}
	return err
}

// appendPolicy: `"concurrency";q=N;qu="concurrent-requests", "rps";q=N;w=1`,
// each item only when the plan has that limit.
func appendPolicy(b []byte, l *control.Limits) []byte {
	if l.Concurrency > 0 {
		b = append(b, `"concurrency";q=`...)
		b = strconv.AppendInt(b, int64(l.Concurrency), 10)
		b = append(b, `;qu="concurrent-requests"`...)
	}
	if l.RPS > 0 {
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `"rps";q=`...)
		b = strconv.AppendInt(b, int64(l.RPS), 10)
		b = append(b, ";w=1"...)
	}
	return b
}

// appendRPSItem: `"rps";r=<remaining>;t=<seconds until one more request is
// admitted, rounded up; 0 while requests remain>`.
func appendRPSItem(b []byte, d control.RateDecision) []byte {
	b = append(b, `"rps";r=`...)
	b = strconv.AppendInt(b, int64(max(d.Remaining, 0)), 10)
	b = append(b, ";t="...)
	t := int64(d.ResetAfter)
	if float64(t) < d.ResetAfter {
		t++
	}
	return strconv.AppendInt(b, t, 10)
}

// Admission is one synthesis let through: a concurrency slot and the charge
// for its characters, held until Done.
type Admission struct {
	// Free is the concurrency slots left after this one: the RateLimit
	// `"concurrency";r=` value.
	Free int
	// Remaining is the billing balance after the charge, for
	// X-Billing-Remaining; -1 when billing is off (no header).
	Remaining int64

	lease  control.Lease
	charge control.Charge
	s      *Server
	done   atomic.Bool
}

// admit lets one synthesis of chars characters through for p, or refuses it
// with a *control.Error (nothing held, nothing billed). streaming is true for
// the streaming transports (SSE, WebSocket, streamed compat), which need the
// plan's streaming feature when billing is enforced. Transport neutral: the
// caller sends the values of the Admission (HTTP: setAdmissionHeaders) and
// must call Done exactly once it is finished, whatever happened.
func (s *Server) admit(p *control.Principal, chars int64, streaming bool) (*Admission, error) {
	l := &p.Limits
	if streaming && !l.Streaming && l.Billing == control.BillingEnforce {
		err := &control.Error{Code: control.EFeatureDisabled, Feature: "streaming",
			Message: "the plan does not include streaming"}
		s.synth.m.refused(p.WorkspaceID, err) // the limiter and the meter count the others
		return nil, err
	}
	c, cancel := context.WithTimeout(context.Background(), limitTimeout)
	defer cancel()
	lease, free, err := s.limiter.Acquire(c, p.WorkspaceID, control.SlotStream, l.Concurrency)
	if err != nil {
		return nil, err
	}
	charge, remaining, err := s.synth.meter.Charge(c, workspaceOf(p), chars)
	if err != nil {
		lease.Release()
		return nil, err
	}
	a := &Admission{Free: free, Remaining: remaining, lease: lease, charge: charge, s: s}
	s.synth.active.Inc()
	if p.Token != nil && s.synth.consumeToken != nil {
		if err := s.synth.consumeToken(c, p); err != nil {
			a.Done(0)
			return nil, err
		}
	}
	return a, nil
}

// workspaceOf is the workspace as the meter needs it: p's limits, resolved
// already, as overrides.
func workspaceOf(p *control.Principal) *control.Workspace {
	l := p.Limits
	return &control.Workspace{ID: p.WorkspaceID, Plan: p.Plan, Billing: l.Billing, Allowance: &l.MonthlyChars}
}

// Done ends the synthesis: a charge that produced no audio (samples == 0:
// the engine failed at once, or the client left first) is refunded, and the
// slot is freed. Only the first call counts; safe from any goroutine.
func (a *Admission) Done(samples int64) {
	if a == nil || !a.done.CompareAndSwap(false, true) {
		return
	}
	a.lease.Release()
	a.s.synth.active.Dec()
	if samples > 0 {
		return
	}
	c, cancel := context.WithTimeout(context.Background(), limitTimeout)
	defer cancel()
	if err := a.s.synth.meter.Refund(c, a.charge); err != nil {
		a.s.log.Error("refund failed", "workspace", a.charge.WorkspaceID, "err", err)
	}
}

// setAdmissionHeaders adds the concurrency item to RateLimit (after the rps
// item admitRequest set) and X-Billing-Remaining when billing is on. With a
// nil a and err a concurrency refusal, it reports no free slot.
func setAdmissionHeaders(ctx *fasthttp.RequestCtx, a *Admission, err error) {
	free := -1
	switch {
	case a != nil:
		free = a.Free
	case control.IsCode(err, control.EConcurrencyLimited):
		free = 0
	}
	h := &ctx.Response.Header
	var buf [96]byte
	if free >= 0 {
		b := append(buf[:0], peekExact(h, hdrRateLimit)...)
		if len(b) > 0 {
			b = append(b, ", "...)
		}
		b = append(b, `"concurrency";r=`...)
		h.SetCanonical(hdrRateLimit, strconv.AppendInt(b, int64(free), 10))
	}
	if a != nil && a.Remaining >= 0 {
		h.SetCanonical(hdrBillingRemain, strconv.AppendInt(buf[:0], a.Remaining, 10))
	}
}

// outcome records how a synthesis ended, for voicesvc_synth_total.
func (s *Server) outcome(transport string, err error) {
	if err == nil {
		s.synth.m.series(transport).ok.Inc()
		return
	}
	o := "client_gone"
	if !isClientGone(err) {
		o = control.ErrorCode(err)
	}
	s.synth.outcomes.WithLabelValues(transport, o).Inc()
}

// peekExact returns a header set with SetCanonical under a name that is
// not in fasthttp's normalized case ("RateLimit"), which Peek would not find.
func peekExact(h *fasthttp.ResponseHeader, name []byte) []byte {
	var v []byte
	h.VisitAll(func(k, val []byte) {
		if v == nil && string(k) == string(name) {
			v = val
		}
	})
	return v
}
