package gateway

import (
	"context"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/lease"
	"voicesvc/synth"
	"voicesvc/telemetry"
)

// Admission is the core's (synth/admit.go): this file only writes its
// answers as headers. The route wrapper calls admitRequest for every
// authenticated API request (the rps budget, RateLimit-Policy and
// RateLimit headers); each synthesis protocol calls the core's Admit after
// its own decoding and answers the Admission's values with
// setAdmissionHeaders.

// synthState is the server's synthesis machinery (Server.synth).
type synthState struct {
	meter  control.Meter
	active prometheus.Gauge
	m      *telemetry.Synth
}

// initSynthesis builds the core: an in-process limiter when none is given
// (one server on SQLite) and the store's meter at the server's billing
// mode, both counted for /metrics.
func (s *Server) initSynthesis(deps Deps) error {
	s.synth.active = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "voicesvc_synth_active",
		Help: "Admitted syntheses holding a concurrency slot, all transports.",
	})
	m := telemetry.NewSynth(s.cfg.MetricsWorkspaceLabel)
	s.synth.m = m
	// The store, the limiter and the meter are timed and counted where the
	// server holds them (package telemetry).
	s.store = telemetry.NewTimedStore(s.store, m.Store())
	limiter := deps.Limiter
	if _, inProcess := limiter.(*control.MemoryLimiter); limiter != nil && !inProcess {
		limiter = telemetry.NewTimedLimiter(limiter, m.Store()) // the shared store's: a round trip per call
	}
	if limiter == nil {
		limiter = control.NewMemoryLimiter()
	}
	meter := deps.Meter
	if deps.Leases != nil {
		// The leases over the timed store: their calls are in
		// voicesvc_store_duration_seconds like every other.
		s.leases = lease.New(lease.Deps{Store: s.store, Rates: limiter, Billing: deps.Billing, Logger: s.log}, *deps.Leases)
		limiter = s.leases
		if meter == nil {
			meter = s.leases.Meter()
		}
	}
	if meter == nil {
		meter = control.NewMeter(s.store, deps.Billing)
	}
	s.synth.meter = m.CountingMeter(meter)
	var err error
	s.core, err = synth.NewService(synth.Deps{
		Store: s.store, Voices: synth.NewVoiceCache(s.cfg.VoiceCacheTTL),
		Engines: s.engines, Engine: s.engine,
		Limiter: m.CountingLimiter(limiter), Meter: s.synth.meter,
		Hooks:  synth.Hooks{Refused: m.Refused, Active: s.synth.active},
		Logger: s.log, StoreTimeout: limitTimeout, Billing: deps.Billing,
		Keys:       synth.KeyCacheConfig{MB: s.cfg.KeyCacheMB, TTL: s.cfg.KeyCacheTTL, NegativeTTL: s.cfg.NegativeKeyTTL},
		MaxUploads: s.cfg.MaxUploads, MediaDir: deps.MediaDir, JobQueued: deps.JobQueued,
	})
	if err != nil {
		return err
	}
	cs := append([]prometheus.Collector{s.synth.active}, m.Collectors()...)
	if s.leases != nil {
		cs = append(cs, s.leases.Collector()) // the leases held (docs/api.md#metrics)
	}
	for _, c := range cs {
		if err := s.metrics.reg.Register(c); err != nil {
			return err
		}
	}
	return telemetry.RegisterEngines(s.metrics.reg, s.engines)
}

// limitTimeout bounds one limiter, meter or store call of the core (a
// store round trip with Postgres).
const limitTimeout = 5 * time.Second

var (
	hdrRateLimit       = []byte("RateLimit")
	hdrRateLimitPolicy = []byte("RateLimit-Policy")
	hdrBillingRemain   = []byte("X-Billing-Remaining")
)

// admitRequest counts one request against p's workspace (the core's
// AllowRequest) and stamps the RateLimit-Policy and RateLimit headers of
// docs/api.md#limits, on refusals too.
func (s *Server) admitRequest(ctx *fasthttp.RequestCtx, p *control.Principal) error {
	var buf [96]byte
	if b := appendPolicy(buf[:0], &p.Limits); len(b) > 0 {
		ctx.Response.Header.SetCanonical(hdrRateLimitPolicy, b)
	}
	d, err := s.core.AllowRequest(ctx, p)
	if d.Limit > 0 {
		ctx.Response.Header.SetCanonical(hdrRateLimit, appendRPSItem(buf[:0], d))
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

// setAdmissionHeaders adds the concurrency item to RateLimit (after the rps
// item admitRequest set) and X-Billing-Remaining when billing is on. With a
// nil a and err a concurrency refusal, it reports no free slot.
func setAdmissionHeaders(ctx *fasthttp.RequestCtx, a *synth.Admission, err error) {
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
func (s *Server) outcome(ts *telemetry.Series, err error) {
	o := "ok"
	switch {
	case isClientGone(err):
		o = "client_gone"
	case err != nil:
		o = control.ErrorCode(err)
	}
	ts.Outcome(o)
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

// closeLeases settles and gives back the server's leases once it drained,
// so that other servers get the capacity at once instead of after the
// leases' lifetime.
func (s *Server) closeLeases() {
	if s.leases == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeout)
	defer cancel()
	if err := s.leases.Close(ctx); err != nil {
		s.log.Warn("leases not given back; they expire on their own", "err", err)
	}
}

// changeFeed is the store's change feed as the core follows it: with
// leases, a workspace's change also makes its leases stale, after the core
// dropped its cached keys, so that the next request asks the store with the
// new limits.
func (s *Server) changeFeed() control.ChangeFeed {
	if s.leases == nil {
		return s.store
	}
	return leaseFeed{s.store, s.leases}
}

type leaseFeed struct {
	control.ChangeFeed
	leases *lease.Manager
}

func (f leaseFeed) WatchChanges(ctx context.Context, fn func(control.Change)) error {
	return f.ChangeFeed.WatchChanges(ctx, func(c control.Change) {
		fn(c)
		if c.Kind == "workspace" {
			f.leases.Invalidate(c.ID)
		}
	})
}
