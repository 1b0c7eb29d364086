package control

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// MemoryLimiter is the in-process Limiter used with the SQLite store (one
// server). All state sits behind one mutex: the critical sections are a map
// lookup and a few integer operations, far below the cost of contention
// worth sharding for.
//
// Request rate is a sliding log: a workspace keeps the times of its last rps
// admissions in a ring, and a request is admitted when the oldest of them is
// at least one second old. So at most rps requests are admitted in ANY
// one-second window (a burst of rps is allowed), which GCRA with a burst of
// rps does not guarantee (it admits rps+1 in some windows).
type MemoryLimiter struct {
	mu    sync.Mutex
	rates map[string]*rateLog
	slots map[slotKey]int
	now   func() time.Time // tests move time by hand
	epoch time.Time
}

var _ Limiter = (*MemoryLimiter)(nil)

type slotKey struct{ ws, kind string }

// rateLog is a ring of the last len(at) admission times (unix nanoseconds).
type rateLog struct {
	at   []int64
	next int // index of the oldest entry, overwritten by the next admission
}

// NewMemoryLimiter returns an empty in-process limiter.
func NewMemoryLimiter() *MemoryLimiter {
	return &MemoryLimiter{
		rates: make(map[string]*rateLog),
		slots: make(map[slotKey]int),
		now:   time.Now,
		epoch: time.Now(),
	}
}

// AllowRequest admits one request of ws when fewer than rps were admitted in
// the last second. rps <= 0 means no limit (Limit 0 in the decision). A
// refusal returns the decision (for the RateLimit headers) together with
// ERateLimited whose RetryAfter is the whole seconds, at least 1, until one
// more request would be admitted. ResetAfter is that time in seconds, and 0
// while Remaining > 0.
func (l *MemoryLimiter) AllowRequest(_ context.Context, ws string, rps int) (RateDecision, error) {
	if rps <= 0 {
		return RateDecision{Allowed: true}, nil
	}
	now := int64(l.now().Sub(l.epoch)) // monotonic: immune to wall-clock steps
	const window = int64(time.Second)

	l.mu.Lock()
	r := l.rates[ws]
	if r == nil || len(r.at) != rps {
		// First request of ws or its plan changed: start a fresh log. The
		// only allocation, once per workspace and plan change.
		r = &rateLog{at: make([]int64, rps)}
		for i := range r.at {
			r.at[i] = math.MinInt64 / 2 // long ago, and no overflow below
		}
		l.rates[ws] = r
	}
	oldest := r.at[r.next]
	if now-oldest < window {
		wait := oldest + window - now
		l.mu.Unlock()
		d := RateDecision{Allowed: false, Limit: rps, Remaining: 0, ResetAfter: seconds(wait)}
		return d, RateLimited(d)
	}
	r.at[r.next] = now
	r.next = (r.next + 1) % rps
	// Remaining: the entries (after this admission) that have left the
	// window. The ring is in admission order from r.next, so they are a
	// prefix: binary search keeps large rps overrides cheap.
	lo, hi := 0, rps
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if now-r.at[(r.next+mid)%rps] >= window {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	remaining := lo
	var reset float64
	if remaining == 0 {
		reset = seconds(r.at[r.next] + window - now)
	}
	l.mu.Unlock()
	return RateDecision{Allowed: true, Limit: rps, Remaining: remaining, ResetAfter: reset}, nil
}

// Acquire takes one slot of kind for ws; free is the number left after it. A
// limit of 0 or less has no slot to give and refuses everything. The lease's
// Release is idempotent, so a transport may release both on completion and in
// a deferred cleanup.
func (l *MemoryLimiter) Acquire(_ context.Context, ws, kind string, limit int) (Lease, int, error) {
	k := slotKey{ws, kind}
	l.mu.Lock()
	n := l.slots[k]
	if n >= limit {
		l.mu.Unlock()
		return nil, 0, SlotError(kind)
	}
	l.slots[k] = n + 1
	l.mu.Unlock()
	return &memLease{l: l, k: k}, limit - n - 1, nil
}

// InUse reports how many slots of kind ws holds (tests and metrics).
func (l *MemoryLimiter) InUse(ws, kind string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.slots[slotKey{ws, kind}]
}

func (l *MemoryLimiter) release(k slotKey) {
	l.mu.Lock()
	if n := l.slots[k]; n <= 1 {
		// Delete at zero so that the map does not grow with every
		// workspace ever seen.
		delete(l.slots, k)
	} else {
		l.slots[k] = n - 1
	}
	l.mu.Unlock()
}

type memLease struct {
	l    *MemoryLimiter
	k    slotKey
	done atomic.Bool
}

// Release frees the slot once; a CAS rather than sync.Once avoids a closure
// allocation per synthesis.
func (m *memLease) Release() {
	if m.done.CompareAndSwap(false, true) {
		m.l.release(m.k)
	}
}

// SlotError is the refusal for a full kind. Slots free up when a synthesis
// ends, which is usually within seconds: 1 second is the honest hint.
func SlotError(kind string) *Error {
	if kind == SlotSession {
		return &Error{Code: ETooManySessions, Message: "too many open realtime sessions for this workspace", RetryAfter: 1}
	}
	return &Error{Code: EConcurrencyLimited, Message: "all concurrent-stream slots of this workspace are in use", RetryAfter: 1}
}

func seconds(ns int64) float64 { return float64(ns) / float64(time.Second) }
