package lease

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
)

type slotKey struct{ ws, kind string }

// pool is this server's share of one workspace's slots of one kind.
type pool struct {
	k  slotKey
	mu sync.Mutex
	// limit is the last limit a request brought (the workspace's, after
	// overrides); held is what the store granted, until when it is used.
	limit int
	held  int
	until time.Time
	free  int // the store's free slots (every holder counted) at the grant
	inUse int
	peak  int // most in use since the last tick
	last  time.Time
	stale bool // an admin change, or a new limit: ask the store first
	// syncing is closed when the store call in flight ends; capInFlight
	// bounds inUse meanwhile (the share may shrink to it).
	syncing     chan struct{}
	capInFlight int
	waiting     int // requests waiting for a larger share: the next ask covers them
}

func (m *Manager) pool(k slotKey) *pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pools[k]
	if p == nil {
		p = &pool{k: k}
		m.pools[k] = p
	}
	return p
}

// headroom is how many slots beyond use a share may hold: none for an
// exact (small) limit; else what the server used lately (so that a share
// doubles while demand grows), at most SlotBatch and limit/8.
func (m *Manager) headroom(limit, used int) int {
	if limit < m.cfg.ExactBelow {
		return 0
	}
	return max(min(max(used, 1), m.cfg.SlotBatch, limit/8), 0)
}

// Acquire takes one slot of kind for ws from this server's share, asking
// the store for a larger share when it is used up. A limit below 1 has no
// slot to give. Refusals: EConcurrencyLimited / ETooManySessions with
// Retry-After 1; a store that cannot be reached once the share is used up
// or expired: EStoreUnavailable.
func (m *Manager) Acquire(ctx context.Context, ws, kind string, limit int) (control.Lease, int, error) {
	if limit < 1 {
		return nil, 0, control.SlotError(kind)
	}
	p := m.pool(slotKey{ws, kind})
	asked := 0 // store calls that this request made itself
	for loops := 0; ; loops++ {
		p.mu.Lock()
		now := m.now()
		if p.limit != limit {
			p.limit, p.stale = limit, true
		}
		if p.inUse >= limit && !p.stale { // stale: shrink the share in the store first
			p.mu.Unlock()
			return nil, 0, control.SlotError(kind)
		}
		if !p.stale && p.inUse < p.held && now.Before(p.until) && (p.syncing == nil || p.inUse < p.capInFlight) {
			p.inUse++
			p.peak = max(p.peak, p.inUse)
			p.last = now
			free := max(p.free+p.held-p.inUse, 0)
			p.mu.Unlock()
			return &slot{p: p, m: m}, free, nil
		}
		// Refused once a store call of this request's own found no
		// slot for it (the others' shares fill the limit).
		if asked > 0 && p.free == 0 && p.syncing == nil && !p.stale && now.Before(p.until) || loops > 32 {
			p.mu.Unlock()
			return nil, 0, control.SlotError(kind)
		}
		// The next ask covers every request waiting, plus headroom.
		p.waiting++
		want := min(p.inUse+p.waiting+m.headroom(limit, max(p.peak, p.inUse+p.waiting)), limit)
		p.mu.Unlock()
		did, err := m.syncPool(ctx, p, want, false)
		p.mu.Lock()
		p.waiting--
		p.mu.Unlock()
		if err != nil {
			return nil, 0, err
		}
		if did {
			asked++
		}
	}
}

// syncPool sets the share to want (at least the slots in use) in one store
// call. One call per pool at a time: a caller that finds one in flight
// waits for it instead (background: skips) and retries.
func (m *Manager) syncPool(ctx context.Context, p *pool, want int, background bool) (did bool, _ error) {
	p.mu.Lock()
	if ch := p.syncing; ch != nil {
		p.mu.Unlock()
		if background {
			return false, nil
		}
		return false, awaitSync(ctx, ch)
	}
	want = max(want, p.inUse)
	used := p.inUse
	// No slot beyond the share in hand nor beyond want while the call
	// runs: a shrinking share (to nothing, too) must not lend a slot the
	// store gives away meanwhile.
	p.capInFlight = min(p.held, want)
	ch := make(chan struct{})
	p.syncing = ch
	p.stale = false
	limit := p.limit
	p.mu.Unlock()

	sent := m.now()
	held, free, err := m.st.LeaseSlots(ctx, m.holder, p.k.ws, p.k.kind, limit, used, want, m.cfg.TTL)
	m.count(err)
	p.mu.Lock()
	if err == nil {
		p.held, p.free, p.until = held, free, m.expiry(sent)
	} else if p.limit != limit {
		p.stale = true
	}
	p.syncing = nil
	p.mu.Unlock()
	close(ch)
	return true, err
}

// poolTarget is the share a sync gives p, and whether one is needed: the
// slots in use plus headroom for the recent peak; nothing once idle.
func (m *Manager) poolTarget(p *pool, now time.Time, tick bool) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.syncing != nil {
		return 0, false
	}
	exact := p.limit < m.cfg.ExactBelow
	var want int
	switch {
	case p.inUse == 0 && now.Sub(p.last) >= m.cfg.Idle:
		want = 0
	case exact:
		want = p.inUse
	default:
		want = min(p.limit, max(p.peak, p.inUse)+m.headroom(p.limit, max(p.peak, p.inUse)))
	}
	if tick {
		p.peak = p.inUse
	}
	if want == 0 && p.held == 0 {
		return -1, now.Sub(p.last) >= m.cfg.Idle // nothing held: forget it, no call
	}
	switch {
	case p.stale, exact && want != p.held, want == 0:
		return want, true
	case tick && want > p.held:
		return want, true // grow ahead of the next burst
	case tick && p.held-want >= max(1, m.headroom(p.limit, want)/2):
		return want, true // give back what the last peak did not need
	}
	return want, false
}

func (m *Manager) dropPool(p *pool) {
	p.mu.Lock()
	idle := p.inUse == 0 && p.held == 0 && p.syncing == nil
	p.mu.Unlock()
	if !idle {
		return
	}
	m.mu.Lock()
	if m.pools[p.k] == p {
		delete(m.pools, p.k)
	}
	m.mu.Unlock()
}

// slot is one slot in use; Release is idempotent.
type slot struct {
	p    *pool
	m    *Manager
	done atomic.Bool
}

// Release frees the slot at once for this server's next request. An exact
// (small) limit's slot goes back to the store too, releaseDelay later.
func (s *slot) Release() {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	p := s.p
	p.mu.Lock()
	p.inUse--
	p.last = s.m.now()
	exact := p.limit < s.m.cfg.ExactBelow
	p.mu.Unlock()
	if exact {
		s.m.kick()
	}
}
