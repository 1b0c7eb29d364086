package lease

import (
	"context"
	"sync"
	"time"

	"voicesvc/control"
)

// rate is this server's share of one workspace's rps window: requests it
// admits in memory until the share is used up or its validity (RPSFor
// after the ask was sent) ends. The store recorded the share in the
// window as admitted at the grant, so a share used within its validity
// never lets the window admit a second burst.
type rate struct {
	ws string
	mu sync.Mutex
	// rps is the limit the share was asked under; a new one makes it
	// stale.
	rps   int
	left  int       // requests of the share not yet admitted
	until time.Time // the share's validity
	at    int64     // the store's record of the share (for its give-back)
	// size is the next ask: doubled when a share is used up within its
	// validity, halved when most of it expires unused.
	size int
	// remaining and reset are the store's view at the grant (other
	// servers' requests and shares counted), for the RateLimit header.
	remaining int
	reset     time.Time // when the window admits one more, while full
	full      time.Time // the store granted nothing: refuse here until then
	last      time.Time
	stale     bool
	syncing   chan struct{}
}

func (m *Manager) rate(ws string) *rate {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.rates[ws]
	if r == nil {
		r = &rate{ws: ws, size: 1}
		m.rates[ws] = r
	}
	return r
}

// shareCap is the most requests one share holds: RPSBatch and an eighth
// of the limit (at least 1).
func (m *Manager) shareCap(rps int) int { return max(min(m.cfg.RPSBatch, rps/8), 1) }

// AllowRequest counts one request against ws's requests per second. A
// limit below ExactBelow is counted exactly (Deps.Rates: a store call per
// request on a shared store); a larger one from this server's share of the
// window, asking the store for a new share when it is used up or expired.
func (m *Manager) AllowRequest(ctx context.Context, ws string, rps int) (control.RateDecision, error) {
	if rps <= 0 {
		return control.RateDecision{Allowed: true}, nil
	}
	if rps < m.cfg.ExactBelow {
		return m.exact.AllowRequest(ctx, ws, rps)
	}
	r := m.rate(ws)
	for loops := 0; ; loops++ {
		r.mu.Lock()
		now := m.now()
		r.last = now
		if r.rps != rps {
			r.rps, r.stale = rps, true
			r.size = min(r.size, m.shareCap(rps))
		}
		if !r.stale && r.left > 0 && now.Before(r.until) {
			r.left--
			d := r.decision(now)
			r.mu.Unlock()
			return d, nil
		}
		if !r.stale && now.Before(r.full) || loops > 32 {
			d := control.RateDecision{Limit: rps, ResetAfter: max(r.full.Sub(now), time.Millisecond).Seconds()}
			r.mu.Unlock()
			return d, control.RateLimited(d)
		}
		r.mu.Unlock()
		if err := m.syncRate(ctx, r); err != nil {
			return control.RateDecision{}, err
		}
	}
}

// decision is the RateLimit header's view: what the store left of the
// window at the grant plus what this server still holds of its share.
// Call with r.mu held.
func (r *rate) decision(now time.Time) control.RateDecision {
	d := control.RateDecision{Allowed: true, Limit: r.rps, Remaining: r.remaining + r.left}
	if d.Remaining == 0 {
		d.ResetAfter = max(r.reset.Sub(now), time.Millisecond).Seconds()
	}
	return d
}

// syncRate asks the store for a new share, giving back what is left of the
// old one. One call per workspace at a time: a request that finds one in
// flight waits for it and retries.
func (m *Manager) syncRate(ctx context.Context, r *rate) error {
	r.mu.Lock()
	if ch := r.syncing; ch != nil {
		r.mu.Unlock()
		return awaitSync(ctx, ch)
	}
	now := m.now()
	back := control.RequestsBack{At: r.at, N: r.left}
	if r.at == 0 {
		back.N = 0
	}
	// Sizing: a share used up within its validity was too small; one that
	// expired with most of it unused was too large.
	switch {
	case r.stale:
	case r.left == 0 && now.Before(r.until):
		r.size = min(r.size*2, m.shareCap(r.rps))
	case r.left > r.size/2:
		r.size = max(r.size/2, 1)
	}
	want := min(r.size, m.shareCap(r.rps))
	rps := r.rps
	r.left, r.at = 0, 0 // nothing of the old share is used once the ask is sent
	r.stale = false
	ch := make(chan struct{})
	r.syncing = ch
	r.mu.Unlock()

	sent := m.now()
	g, err := m.st.LeaseRequests(ctx, r.ws, rps, want, back)
	m.count(err)
	r.mu.Lock()
	if err == nil && r.rps == rps {
		r.left, r.at, r.until = g.Granted, g.At, sent.Add(m.cfg.RPSFor)
		r.remaining = g.Remaining
		r.reset = sent.Add(time.Duration(g.ResetMS) * time.Millisecond)
		r.full = time.Time{}
		if g.Granted == 0 {
			r.full = sent.Add(max(time.Duration(g.ResetMS)*time.Millisecond, time.Millisecond))
		}
	} else if err == nil {
		// The limit changed while the call ran: give the grant back with
		// the next ask, under the new limit.
		r.at, r.left, r.until, r.stale = g.At, g.Granted, time.Time{}, true
	}
	r.syncing = nil
	r.mu.Unlock()
	close(ch)
	return err
}

// rateIdle forgets the workspaces whose shares expired and that had no
// request for Idle: nothing is held in the store for them (an unused
// remainder leaves the window within a second by itself).
func (m *Manager) rateIdle(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ws, r := range m.rates {
		r.mu.Lock()
		idle := r.syncing == nil && now.Sub(r.last) >= m.cfg.Idle && !now.Before(r.until)
		r.mu.Unlock()
		if idle {
			delete(m.rates, ws)
		}
	}
}
