package synth

import (
	"context"
	"sync/atomic"

	"voicesvc/control"
	"voicesvc/engine"
)

// Admission: the limits and billing every synthesis passes
// (docs/api.md#limits, #plans), for every protocol. Two gates:
//
//  1. AllowRequest, for every authenticated API request (the HTTP route
//     wrapper calls it for all routes, synthesis or not): the workspace's
//     requests-per-second budget. 429 rate_limited with Retry-After.
//  2. Admit, once a synthesis is validated (a request refused for its
//     body, voice or language takes neither a slot nor a charge). In order:
//     for a realtime session, the built-in engine's readiness, the balance
//     (402 when nothing is left) and one of the workspace's session slots
//     (429 too_many_sessions); then the streaming feature (streaming
//     protocols, billing enforced: 403 feature_disabled), one concurrency
//     slot (429 concurrency_limited), the charge for the text's characters
//     (402 quota_exhausted / insufficient_credits), and last the access
//     token's single use (401 token_invalid when another use won). A
//     refusal at any step undoes the steps before it: a refused request
//     holds no slot, is never billed and leaves its token valid.
//
// The protocol then synthesizes and calls Admission.Done with the samples
// it produced: no audio refunds the up-front charge; Done always frees the
// slots. A realtime session charges its text as it arrives instead
// (Admission.Charge) and refunds what never reached the engine
// (Admission.Refund).

// AllowRequest counts one request against p's workspace. The decision is
// for the RateLimit header; a refusal is also an ERateLimited error. Plans
// without a request rate make no limiter call.
func (s *Service) AllowRequest(ctx context.Context, p *control.Principal) (control.RateDecision, error) {
	if p.Limits.RPS <= 0 {
		return control.RateDecision{}, nil
	}
	c, cancel := s.call(ctx)
	d, err := s.limiter.AllowRequest(c, p.WorkspaceID, p.Limits.RPS)
	cancel()
	if err == nil && !d.Allowed {
		err = control.RateLimited(d) // a limiter that refused without an error
	}
	return d, err
}

// AdmitSession is the whole admission of a realtime session whose
// principal is known only once the socket is open (its credential in its
// first message, sessions.FirstMessage): the scope its route needs, the
// request rate, then Admit as a session. A handshake's session passes the
// same steps where their answers are HTTP headers: the route wrapper's
// scope and AllowRequest, then Admit(SessionAsk) at the upgrade.
func (s *Service) AdmitSession(ctx context.Context, p *control.Principal, scope string) (*Admission, error) {
	if !p.Has(scope) {
		return nil, ScopeError(scope)
	}
	if _, err := s.AllowRequest(ctx, p); err != nil {
		return nil, err
	}
	return s.Admit(ctx, p, SessionAsk)
}

// ScopeError names the scope a route needs, so that a client (and the
// dashboard) can say what the key lacks.
func ScopeError(scope string) error {
	if scope == control.ScopeAnyKey {
		return control.Errorf(control.EInsufficientScope, "this endpoint takes an API key of the workspace or its dashboard session")
	}
	return control.Errorf(control.EInsufficientScope, "the API key lacks the scope %q this endpoint requires", scope)
}

// SessionAsk is a realtime session's ask: a streaming protocol, a session
// slot, its text charged as it arrives.
var SessionAsk = Ask{Streaming: true, Session: true}

// Ask is what a synthesis asks admission for.
type Ask struct {
	// Chars are charged up front (the whole text of a one-shot synthesis);
	// 0 for a realtime session, which charges as text arrives.
	Chars int64
	// Streaming protocols (SSE, WebSocket, streamed compat) need the
	// plan's streaming feature when billing is enforced.
	Streaming bool
	// Session: a realtime session, which also holds one of the
	// workspace's session slots and needs a balance to start.
	Session bool
}

// Admission is one synthesis (or realtime session) let through: its slots
// and its up-front charge, held until Done.
type Admission struct {
	// Free is the concurrency slots left after this one: the RateLimit
	// `"concurrency";r=` value.
	Free int
	// Remaining is the billing balance after the charge, for
	// X-Billing-Remaining; -1 when billing is off.
	Remaining int64

	s       *Service
	ws      *control.Workspace
	stream  control.Lease
	session control.Lease // a realtime session's; nil otherwise
	charge  control.Charge
	done    atomic.Bool
}

var errNoEngineReady = &control.Error{Code: control.EUpstreamBusy, Message: "the synthesis engine is unavailable", RetryAfter: 1}

// Admit lets one synthesis through for p, or refuses it with a
// *control.Error, holding nothing and billing nothing. The caller must call
// Done exactly once whatever happens next.
func (s *Service) Admit(ctx context.Context, p *control.Principal, ask Ask) (*Admission, error) {
	a := &Admission{s: s, ws: WorkspaceOf(p), Remaining: -1}
	c, cancel := s.call(ctx)
	defer cancel()
	if ask.Session {
		if err := s.EngineReady(); err != nil {
			return nil, err
		}
		if p.Limits.Billing == control.BillingEnforce {
			if _, err := s.meter.Check(c, a.ws); err != nil {
				return nil, err
			}
		}
		lease, _, err := s.limiter.Acquire(c, p.WorkspaceID, control.SlotSession, p.Limits.Sessions)
		if err != nil {
			return nil, err
		}
		a.session = lease
	}
	if err := s.admitStream(c, p, ask, a); err != nil {
		if a.session != nil {
			a.session.Release()
		}
		return nil, err
	}
	if s.hooks.Active != nil {
		s.hooks.Active.Inc()
	}
	if p.Token != nil {
		if err := s.consumeToken(c, p); err != nil {
			a.Done(0)
			return nil, err
		}
	}
	return a, nil
}

// admitStream takes the streaming feature, the concurrency slot and the
// up-front charge, undoing the slot when the charge is refused.
func (s *Service) admitStream(c context.Context, p *control.Principal, ask Ask, a *Admission) error {
	l := &p.Limits
	if ask.Streaming && !l.Streaming && l.Billing == control.BillingEnforce {
		err := &control.Error{Code: control.EFeatureDisabled, Feature: "streaming",
			Message: "the plan does not include streaming"}
		if s.hooks.Refused != nil {
			s.hooks.Refused(p.WorkspaceID, err) // the limiter and the meter count the others
		}
		return err
	}
	lease, free, err := s.limiter.Acquire(c, p.WorkspaceID, control.SlotStream, l.Concurrency)
	if err != nil {
		return err
	}
	// A session's charge is 0 (it charges as text arrives): the answer
	// still carries the balance for its 101.
	charge, remaining, err := s.meter.Charge(c, a.ws, ask.Chars)
	if err != nil {
		lease.Release()
		return err
	}
	a.charge, a.Remaining = charge, remaining
	a.stream, a.Free = lease, free
	return nil
}

var errTokenUsed = control.Errorf(control.ETokenInvalid, "access token unknown, expired or used")

// consumeToken spends p's access token: THE moment a token is used, once
// the request is certain to run.
func (s *Service) consumeToken(c context.Context, p *control.Principal) error {
	if err := s.store.ConsumeToken(c, p.Token.Hash, control.NowMS()); err != nil {
		if control.IsCode(err, control.ETokenInvalid) {
			return errTokenUsed
		}
		return err
	}
	return nil
}

// engineReadier is an engine that can tell it is closed or out of workers
// before a request tries it.
type engineReadier interface{ Ready() error }

// EngineReady: 503 upstream_busy when the built-in engine cannot take
// work: none is configured, it is closed or its queue is full, or it is at
// capacity (engine.Admitter: new work would make the admitted streams
// late), with the Retry-After the engine gives.
func (s *Service) EngineReady() error {
	if s.builtin == nil {
		return errNoEngineReady
	}
	if r, ok := s.builtin.(engineReadier); ok && r.Ready() != nil {
		return errNoEngineReady
	}
	if err := engine.Admit(s.builtin); err != nil {
		return EngineError(err)
	}
	return nil
}

// Done ends the synthesis: an up-front charge that produced no audio
// (samples == 0: the engine failed at once, or the client left first) is
// refunded, and the slots are freed. Only the first call counts; safe from
// any goroutine and on a nil Admission.
func (a *Admission) Done(samples int64) {
	if a == nil || !a.done.CompareAndSwap(false, true) {
		return
	}
	a.stream.Release()
	if a.session != nil {
		a.session.Release()
	}
	if h := a.s.hooks.Active; h != nil {
		h.Dec()
	}
	if samples > 0 {
		return
	}
	if err := a.Refund(context.Background(), a.charge); err != nil {
		a.s.log.Error("refund failed", "workspace", a.charge.WorkspaceID, "err", err)
	}
}

// Charge bills chars more characters of a realtime session's text, as it
// arrives. In enforce mode a charge that is not covered is refused whole.
// The session's own context: the store bounds its calls itself.
func (a *Admission) Charge(ctx context.Context, chars int64) (control.Charge, error) {
	ch, _, err := a.s.meter.Charge(ctx, a.ws, chars)
	return ch, err
}

// Refund gives back a charge whose text never reached the engine.
func (a *Admission) Refund(ctx context.Context, ch control.Charge) error {
	c, cancel := a.s.call(ctx)
	defer cancel()
	return a.s.meter.Refund(c, ch)
}
