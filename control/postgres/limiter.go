package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
)

var _ control.Limiter = (*Limiter)(nil)

// LimiterOptions tune lease expiry; zero values take the defaults.
type LimiterOptions struct {
	// TTL is how long a slot outlives its holder's last renewal (15 s): a
	// crashed server's slots return within TTL.
	TTL time.Duration
	// RenewEvery is how often a holder extends its slots (5 s).
	RenewEvery time.Duration
}

// Limiter counts request rates and concurrency slots per workspace across
// every server on the database. Slots are lease rows owned by holder and
// renewed in the background until released or Close.
//
// Release does not wait for the database: it queues the lease, and the
// row is deleted by the next Acquire of this limiter (in the same round
// trip as its slot) or by a background flush releaseDelay later, whichever
// comes first. So a request does not pay a round trip to give its slot
// back, this server sees its own releases at once, and other servers see
// them at most releaseDelay plus a round trip later (the limit is briefly
// stricter, never looser). Close flushes.
//
// A release that fails to reach the database (the store is down or hung)
// is kept and retried in the background, every retryMax at most, until it
// lands or the limiter closes: when the store comes back its slots are free
// within a second, instead of staying taken until their TTL (issue 26).
// At most maxPending releases wait; beyond, the oldest are given up to
// expire after TTL, so an outage cannot grow memory without bound.
type Limiter struct {
	db     *DB
	holder string
	ttl    time.Duration
	every  time.Duration
	cancel context.CancelFunc
	done   chan struct{} // closed when renew and flush have returned
	wake   chan struct{} // a release is queued (capacity 1)

	mu       sync.Mutex
	held     map[string]struct{} // lease ids to renew
	released []string            // released, not yet deleted, not in flight
	flushing chan struct{}       // closed when the flush in flight ends; nil when none
	closed   bool
}

// Limiter returns a limiter with the default lease timing; holder names this
// server process and must be unique among the servers.
func (db *DB) Limiter(holder string) *Limiter { return db.LimiterWith(holder, LimiterOptions{}) }

// LimiterWith returns a limiter with the given lease timing.
func (db *DB) LimiterWith(holder string, opts LimiterOptions) *Limiter {
	if opts.TTL <= 0 {
		opts.TTL = 15 * time.Second
	}
	if opts.RenewEvery <= 0 {
		opts.RenewEvery = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &Limiter{db: db, holder: holder, ttl: opts.TTL, every: opts.RenewEvery, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1), held: map[string]struct{}{}}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.renew(ctx) }()
	go func() { defer wg.Done(); l.flushLoop(ctx) }()
	go func() { wg.Wait(); close(l.done) }()
	return l
}

// Close stops renewing and deletes the leases already released (a later
// Release deletes its lease itself). Slots still held are not released:
// they expire after TTL, exactly as if the server had crashed.
func (l *Limiter) Close() {
	l.cancel()
	<-l.done
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), l.db.timeout)
	defer cancel()
	_ = l.flush(ctx) // what fails now expires after TTL
}

// renew extends the leases this limiter holds, in one statement per tick.
// Only held ids are renewed, so a lease whose Release failed to reach the
// database still expires. A failed renewal is retried at the next tick; the
// default TTL leaves room for two.
func (l *Limiter) renew(ctx context.Context) {
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		ids := make([]string, 0, len(l.held))
		for id := range l.held {
			ids = append(ids, id)
		}
		l.mu.Unlock()
		if len(ids) == 0 {
			continue
		}
		// SKIP LOCKED: a row locked now is being deleted (released, or
		// swept as expired), and a renewal that never waits cannot close a
		// deadlock cycle with the multi-row deletes of Acquire and flush.
		rctx, cancel := context.WithTimeout(ctx, l.every)
		_, _ = l.db.pool.Exec(rctx, `UPDATE limiter_leases SET expires_at = limiter_now_ms() + $1
			WHERE lease_id IN (SELECT lease_id FROM limiter_leases WHERE lease_id = ANY($2) FOR UPDATE SKIP LOCKED)`,
			l.ttl.Milliseconds(), ids)
		cancel()
	}
}

// Acquire takes one slot of kind for ws when fewer than limit are held
// across all servers; limit < 1 means no limit (nothing is recorded).
func (l *Limiter) Acquire(ctx context.Context, ws, kind string, limit int) (_ control.Lease, _ int, err error) {
	ctx, end := l.db.call(ctx)
	defer end(&err)
	if limit < 1 {
		return noLease{}, 0, nil
	}
	id := control.NewID()
	// This server's releases not yet deleted go along, so that the count
	// sees them. One in flight in a flush is waited for instead: two
	// transactions deleting the same rows could lock them in different
	// orders and deadlock.
	l.mu.Lock()
	release := l.released
	l.released = nil
	inFlight := l.flushing
	l.mu.Unlock()
	if inFlight != nil {
		select {
		case <-inFlight:
		case <-ctx.Done():
			l.requeue(release)
			return nil, 0, fmt.Errorf("postgres: acquire slot: %w", ctx.Err())
		}
	}
	if release == nil {
		release = []string{} // a NULL array would make cardinality NULL
	}
	var ok bool
	var free int
	err = l.db.pool.QueryRow(ctx, `SELECT ok, free FROM limiter_slot_take($1, $2, $3, $4, $5, $6, $7)`,
		ws, kind, limit, id, l.holder, l.ttl.Milliseconds(), release).Scan(&ok, &free)
	if err != nil {
		l.requeue(release)
		return nil, 0, fmt.Errorf("postgres: acquire slot: %w", err)
	}
	if !ok {
		code, msg := control.EConcurrencyLimited, "too many concurrent streams for this workspace"
		if kind == control.SlotSession {
			code, msg = control.ETooManySessions, "too many open realtime sessions for this workspace"
		}
		e := control.Errorf(code, "%s", msg)
		e.RetryAfter = 1
		return nil, 0, e
	}
	l.mu.Lock()
	l.held[id] = struct{}{}
	l.mu.Unlock()
	return &lease{l: l, id: id}, free, nil
}

// AllowRequest admits one request of ws if fewer than rps were admitted in
// the last second (a sliding window: any 1-second span holds at most rps
// admissions, a burst of rps included). rps < 1 means no limit.
func (l *Limiter) AllowRequest(ctx context.Context, ws string, rps int) (_ control.RateDecision, err error) {
	ctx, end := l.db.call(ctx)
	defer end(&err)
	if rps < 1 {
		return control.RateDecision{Allowed: true}, nil
	}
	d := control.RateDecision{Limit: rps}
	var resetMS int64
	err = l.db.pool.QueryRow(ctx, `SELECT allowed, remaining, reset_ms FROM limiter_rate_take($1, $2)`, ws, rps).
		Scan(&d.Allowed, &d.Remaining, &resetMS)
	if err != nil {
		return control.RateDecision{}, fmt.Errorf("postgres: rate: %w", err)
	}
	d.ResetAfter = float64(resetMS) / 1000
	if !d.Allowed {
		return d, control.RateLimited(d)
	}
	return d, nil
}

// lease is one held slot.
type lease struct {
	l    *Limiter
	id   string
	done atomic.Bool
}

// Release frees the slot once however often it is called. It queues the
// lease for deletion and returns without a round trip; after Close, when no
// flush runs any more, it deletes the row itself. A deletion that fails is
// retried in the background until it lands (after Close it is not: the row,
// no longer renewed, expires after TTL).
func (s *lease) Release() {
	if !s.done.CompareAndSwap(false, true) {
		return
	}
	l := s.l
	l.mu.Lock()
	delete(l.held, s.id)
	closed := l.closed
	if !closed {
		l.released = boundPending(append(l.released, s.id))
	}
	l.mu.Unlock()
	if closed {
		ctx, cancel := context.WithTimeout(context.Background(), l.db.timeout)
		defer cancel()
		_, _ = l.db.pool.Exec(ctx, `SELECT limiter_slots_release($1)`, []string{s.id})
		return
	}
	select {
	case l.wake <- struct{}{}:
	default: // a flush is already due; it takes this lease too
	}
}

// requeue gives back releases that an Acquire took along but could not
// apply, for the next flush.
func (l *Limiter) requeue(ids []string) {
	if len(ids) == 0 {
		return
	}
	l.mu.Lock()
	l.released = boundPending(append(l.released, ids...))
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// releaseDelay is how long a queued release waits for this server's next
// Acquire to delete it in the same round trip, before the flush deletes it
// in one of its own. A flush right away would compete for the CPU with the
// next request's round trips; on a busy server most releases never need
// one. Other servers see a release at most this much later.
const releaseDelay = 20 * time.Millisecond

// Retrying releases that failed: the first retry after retryMin, doubling
// up to retryMax, which bounds how long after the store's return its slots
// stay taken.
const (
	retryMin = 25 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

// maxPending bounds the releases kept for retry during an outage.
const maxPending = 1 << 16

// boundPending drops the oldest releases beyond maxPending: those rows are
// no longer renewed and expire after TTL.
func boundPending(ids []string) []string {
	if over := len(ids) - maxPending; over > 0 {
		ids = append(ids[:0], ids[over:]...)
	}
	return ids
}

// flushLoop deletes queued releases releaseDelay after the first of them
// was queued, in one statement for all of them, until ctx ends. A flush
// that fails is retried with backoff until it lands.
func (l *Limiter) flushLoop(ctx context.Context) {
	t := time.NewTimer(releaseDelay)
	t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.wake:
		}
		t.Reset(releaseDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		for wait := retryMin; ; wait = min(2*wait, retryMax) {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.db.timeout)
			err := l.flush(fctx)
			cancel()
			if err == nil {
				break
			}
			t.Reset(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return // Close flushes once more
			case <-t.C:
			}
		}
	}
}

// flush deletes the queued releases. Acquire waits for a flush in flight
// (l.flushing) before counting, so that it never counts a lease its own
// server has released. A failed delete puts its releases back in the
// queue for the next try.
func (l *Limiter) flush(ctx context.Context) error {
	l.mu.Lock()
	ids := l.released
	l.released = nil
	if len(ids) == 0 {
		l.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	l.flushing = done
	l.mu.Unlock()
	_, err := l.db.pool.Exec(ctx, `SELECT limiter_slots_release($1)`, ids)
	l.mu.Lock()
	if err != nil {
		// Older first, so that boundPending gives up the oldest.
		l.released = boundPending(append(ids, l.released...))
	}
	l.flushing = nil
	l.mu.Unlock()
	close(done)
	return err
}

type noLease struct{}

func (noLease) Release() {}
