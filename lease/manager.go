package lease

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
)

// Config bounds the leases; zero fields take the defaults (Defaults).
type Config struct {
	// TTL is how long a share or reservation outlives its last renewal in
	// the store: a server that dies gives its leases back after TTL.
	TTL time.Duration
	// Sync is how often a server settles usage and resizes and renews its
	// leases.
	Sync time.Duration
	// Idle gives a workspace's leases back once it had no request for
	// this long.
	Idle time.Duration
	// SlotBatch is the most slots a server holds beyond those in use.
	SlotBatch int
	// CharBatch is the most characters a server reserves ahead.
	CharBatch int64
	// ExactBelow: a slot limit below it gets no headroom (a share is the
	// slots in use, given back as they free up), and an rps limit below it
	// is counted exactly, a store call per request (Deps.Rates).
	ExactBelow int
	// RPSFor is how long a share of the rps window may be used after it
	// was asked for: the window counts a share as admitted when granted,
	// so a share used later than that would be counted too short.
	RPSFor time.Duration
	// RPSBatch is the most requests one share of the rps window holds
	// (also at most an eighth of the limit).
	RPSBatch int
}

// Defaults are the documented bounds (docs/api.md, "Running several
// servers").
var Defaults = Config{TTL: 10 * time.Second, Sync: 500 * time.Millisecond, Idle: 5 * time.Second,
	SlotBatch: 64, CharBatch: 20_000, ExactBelow: 16, RPSFor: 200 * time.Millisecond, RPSBatch: 1000}

func (c Config) withDefaults() Config {
	d := Defaults
	if c.TTL > 0 {
		d.TTL = c.TTL
	}
	if c.Sync > 0 {
		d.Sync = c.Sync
	}
	if c.Idle > 0 {
		d.Idle = c.Idle
	}
	if c.SlotBatch > 0 {
		d.SlotBatch = c.SlotBatch
	}
	if c.CharBatch > 0 {
		d.CharBatch = c.CharBatch
	}
	if c.ExactBelow > 0 {
		d.ExactBelow = c.ExactBelow
	}
	if c.RPSFor > 0 {
		d.RPSFor = c.RPSFor
	}
	if c.RPSBatch > 0 {
		d.RPSBatch = c.RPSBatch
	}
	// A lease must be renewed at least twice before it expires.
	d.Sync = min(d.Sync, d.TTL/3)
	return d
}

// Deps are what a Manager works over.
type Deps struct {
	Store control.LeaseService
	// Rates counts requests per second exactly (one store call per request
	// on a shared store) for rps limits below Config.ExactBelow; its
	// Acquire is never called.
	Rates control.Limiter
	// Billing is the server's default billing mode.
	Billing string
	Logger  *slog.Logger
}

// Manager holds one server's leases. It is a control.Limiter (slots and
// rps shares; small rps limits through Deps.Rates) and its Meter a
// control.Meter.
type Manager struct {
	st      control.LeaseService
	exact   control.Limiter // small rps limits
	billing string
	cfg     Config
	holder  string
	log     *slog.Logger
	now     func() time.Time

	mu    sync.Mutex
	pools map[slotKey]*pool
	accts map[string]*account
	rates map[string]*rate

	wake   chan struct{}
	cancel context.CancelFunc
	done   chan struct{}
	closed atomic.Bool

	syncs, syncErrors atomic.Int64
}

var _ control.Limiter = (*Manager)(nil)

// New starts a Manager: its background sync runs until Close.
func New(d Deps, cfg Config) *Manager {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Billing == "" {
		d.Billing = control.BillingEnforce
	}
	m := &Manager{st: d.Store, exact: d.Rates, rates: map[string]*rate{}, billing: d.Billing, cfg: cfg.withDefaults(),
		holder: control.NewID(), log: d.Logger, now: time.Now,
		pools: map[slotKey]*pool{}, accts: map[string]*account{},
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	if m.exact == nil {
		m.exact = control.NewMemoryLimiter()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel = cancel
	go m.loop(ctx)
	return m
}

// Holder is this server's name in the store.
func (m *Manager) Holder() string { return m.holder }

// Meter is the Manager's billing side.
func (m *Manager) Meter() control.Meter { return (*meter)(m) }

// Watch marks a workspace's leases stale when an admin change to it
// arrives on feed, so that its next request asks the store with the new
// limits; it returns when ctx ends.
func (m *Manager) Watch(ctx context.Context, feed control.ChangeFeed) {
	for ctx.Err() == nil {
		_ = feed.WatchChanges(ctx, func(c control.Change) {
			if c.Kind == "workspace" {
				m.Invalidate(c.ID)
			}
		})
		select {
		case <-ctx.Done():
		case <-time.After(time.Second): // the feed failed: watch again
		}
	}
}

// Invalidate makes ws's leases stale: its next slot and its next charge
// ask the store first, and the background sync resizes them now.
func (m *Manager) Invalidate(ws string) {
	m.mu.Lock()
	var ps []*pool
	for k, p := range m.pools {
		if k.ws == ws {
			ps = append(ps, p)
		}
	}
	a := m.accts[ws]
	r := m.rates[ws]
	m.mu.Unlock()
	if r != nil {
		r.mu.Lock()
		r.stale = true
		r.mu.Unlock()
	}
	for _, p := range ps {
		p.mu.Lock()
		p.stale = true
		p.mu.Unlock()
	}
	if a != nil {
		a.mu.Lock()
		a.stale = true
		a.mu.Unlock()
	}
	m.kick()
}

// snapshot is every pool, account and rate share now, to work on outside
// m.mu.
func (m *Manager) snapshot() ([]*pool, []*account, []*rate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.pools)), slices.Collect(maps.Values(m.accts)), slices.Collect(maps.Values(m.rates))
}

// awaitSync waits for the store call in flight that closes ch (a caller
// then retries); a ctx that ends first is the store not answering.
func awaitSync(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return control.StoreUnavailableError(ctx.Err())
	}
}

func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Close stops the background sync, settles every workspace's usage and
// gives every lease back to the store. A store that does not answer within
// ctx keeps them until they expire.
func (m *Manager) Close(ctx context.Context) error {
	if !m.closed.CompareAndSwap(false, true) {
		return nil
	}
	m.cancel()
	<-m.done
	_, accts, _ := m.snapshot()
	var first error
	for _, a := range accts {
		if err := m.settle(ctx, a, 0); err != nil && first == nil {
			first = err
		}
	}
	if err := m.st.DropLeases(ctx, m.holder); err != nil && first == nil {
		first = err
	}
	return first
}

// releaseDelay batches the slot returns of exact (small) limits: a
// freed slot reaches the other servers this much later at most, plus a
// round trip.
const releaseDelay = 20 * time.Millisecond

// loop syncs every cfg.Sync, and releaseDelay after a kick.
func (m *Manager) loop(ctx context.Context) {
	defer close(m.done)
	t := time.NewTicker(m.cfg.Sync)
	defer t.Stop()
	lastRenew := m.now()
	for {
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick = true
		case <-m.wake:
			select {
			case <-ctx.Done():
				return
			case <-time.After(releaseDelay):
			}
		}
		if m.syncAll(ctx, tick, m.now().Sub(lastRenew) >= m.cfg.TTL/3) {
			lastRenew = m.now()
		}
	}
}

// syncAll brings every lease to its target: a tick settles usage and
// resizes; a kick only syncs what is stale or dirty. It renews what it did
// not touch when renew is due, and reports whether it renewed.
func (m *Manager) syncAll(ctx context.Context, tick, renew bool) bool {
	pools, accts, _ := m.snapshot()
	now := m.now()
	if tick {
		m.rateIdle(now)
	}
	untouched := 0
	for _, p := range pools {
		want, need := m.poolTarget(p, now, tick)
		if want < 0 {
			if need {
				m.dropPool(p)
			}
			continue
		}
		if !need {
			untouched++
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
		_, err := m.syncPool(cctx, p, want, true)
		cancel()
		if err == nil && want == 0 {
			m.dropPool(p)
		}
	}
	for _, a := range accts {
		want, need := m.accountTarget(a, now, tick)
		if !need {
			untouched++
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
		err := m.settle(cctx, a, want)
		cancel()
		if err == nil && want < 0 {
			m.dropAccount(a)
		}
	}
	if !renew || untouched == 0 {
		return untouched == 0
	}
	sent := m.now()
	cctx, cancel := context.WithTimeout(ctx, m.cfg.TTL/3)
	err := m.st.RenewLeases(cctx, m.holder, m.cfg.TTL)
	cancel()
	m.count(err)
	if err != nil {
		return false
	}
	until := m.expiry(sent)
	for _, p := range pools {
		p.mu.Lock()
		if p.held > 0 && p.syncing == nil {
			p.until = until
		}
		p.mu.Unlock()
	}
	for _, a := range accts {
		a.mu.Lock()
		if a.known && a.syncing == nil {
			a.until = until
		}
		a.mu.Unlock()
	}
	return true
}

// expiry is when a lease renewed (or granted) by a call sent at sent stops
// being used here: before the store lets it go.
func (m *Manager) expiry(sent time.Time) time.Time { return sent.Add(m.cfg.TTL * 9 / 10) }

func (m *Manager) count(err error) {
	m.syncs.Add(1)
	if err != nil {
		m.syncErrors.Add(1)
		m.log.Debug("lease sync failed", "err", err)
	}
}
