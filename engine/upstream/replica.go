package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// replica is one server of an upstream engine, with its own keep-alive
// connections. Its scheduling fields belong to the scheduler's lock.
type replica struct {
	base    string // the configured URL, without a trailing slash
	display string // base with any password hidden
	client  *client
	// The request lines and headers of POST {base}/audio/speech and GET
	// {base}/audio/voices (requestHead).
	speechHead, voicesHead []byte

	// Under sched.mu.
	outstanding int       // requests holding a slot
	failures    int       // consecutive connection failures or 5xx answers
	ejectedTill time.Time // zero when up
	probation   bool      // back from ejection: one more failure ejects it again

	stats counters
}

// counters are a replica's totals since start, for metrics.
type counters struct {
	requests, retries, ejections       atomic.Uint64
	errBusy, errInvalid, errUpstream   atomic.Uint64
	staleRetries, cancelled, completed atomic.Uint64
}

// userAgent names the gateway to the upstream.
const userAgent = "voicesvc"

// newReplica makes the replica at base (a URL Validate accepted) with room
// for slots requests; apiKey, when set, is sent as a bearer token, else a
// user and password in the URL go as basic authentication.
func newReplica(base string, slots int, apiKey string) (*replica, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	speechURL, err := url.Parse(base + "/audio/speech")
	if err != nil {
		return nil, err
	}
	voicesURL, err := url.Parse(base + "/audio/voices")
	if err != nil {
		return nil, err
	}
	auth := http.Header{"User-Agent": {userAgent}}
	switch {
	case apiKey != "":
		auth.Set("Authorization", "Bearer "+apiKey)
	case u.User != nil:
		pw, _ := u.User.Password()
		req := http.Request{Header: auth}
		req.SetBasicAuth(u.User.Username(), pw)
	}
	speech, voices := auth.Clone(), auth.Clone()
	speech.Set("Content-Type", "application/json")
	speech.Set("Accept", "audio/pcm, application/octet-stream, */*;q=0.1")
	voices.Set("Accept", "application/json")
	return &replica{base: base, display: redactURL(base),
		speechHead: requestHead(http.MethodPost, speechURL, speech),
		voicesHead: requestHead(http.MethodGet, voicesURL, voices),
		// One connection per slot, kept alive between sentences: a new
		// connection costs a round trip (two with TLS) before the first
		// audio byte.
		client: newClient(u, slots)}, nil
}

// ejected reports whether r is out at now, bringing it back on probation
// once its time is up. Under sched.mu.
func (r *replica) ejected(now time.Time) bool {
	if r.ejectedTill.IsZero() {
		return false
	}
	if now.Before(r.ejectedTill) {
		return true
	}
	r.ejectedTill = time.Time{}
	r.probation = true
	return false
}

// sched hands out replica slots: least outstanding requests among the
// replicas that are up, at most slots each; requests that find every slot
// taken wait, earliest deadline first, for at most maxWait.
type sched struct {
	mu         sync.Mutex
	replicas   []*replica
	slots      int
	ejectAfter int
	ejectFor   time.Duration
	maxWait    time.Duration
	maxWaiting int
	next       int       // rotates ties among equally loaded replicas
	waiting    []*waiter // by due, then arrival
	seq        uint64
	now        func() time.Time
}

type waiter struct {
	due     time.Time
	seq     uint64
	exclude *replica
	grant   chan grant // buffered: the granter never blocks
}

type grant struct {
	r   *replica
	err error
}

// errNoOther: a retry found no replica but the one that failed.
var errNoOther = errors.New("no other replica is up")

// acquire takes a slot for a request due at due (zero: now) on a replica
// other than exclude. It returns a *BusyError when every replica is
// ejected, too many wait, or none freed up in time; errNoOther when
// exclude is the only replica up; ctx.Err() when cancelled.
func (s *sched) acquire(ctx context.Context, due time.Time, exclude *replica) (*replica, error) {
	s.mu.Lock()
	now := s.now()
	r, err := s.pick(now, exclude)
	if r != nil || err != nil {
		s.mu.Unlock()
		return r, err
	}
	if len(s.waiting) >= s.maxWaiting {
		s.mu.Unlock()
		return nil, &BusyError{RetryAfter: 1, Reason: fmt.Sprintf("%d requests already wait for an upstream slot", s.maxWaiting)}
	}
	if due.IsZero() {
		due = now
	}
	s.seq++
	w := &waiter{due: due, seq: s.seq, exclude: exclude, grant: make(chan grant, 1)}
	i := sort.Search(len(s.waiting), func(i int) bool { return w.before(s.waiting[i]) })
	s.waiting = append(s.waiting, nil)
	copy(s.waiting[i+1:], s.waiting[i:])
	s.waiting[i] = w
	s.mu.Unlock()

	t := time.NewTimer(s.maxWait)
	defer t.Stop()
	select {
	case g := <-w.grant:
		return g.r, g.err
	case <-ctx.Done():
		err = ctx.Err()
	case <-t.C:
		err = &BusyError{RetryAfter: 1, Reason: fmt.Sprintf("no upstream slot freed within %v", s.maxWait)}
	}
	s.mu.Lock()
	if !s.remove(w) {
		// Granted meanwhile: give the slot back.
		s.mu.Unlock()
		if g := <-w.grant; g.r != nil {
			s.release(g.r, classCancel, false)
		}
		return nil, err
	}
	s.mu.Unlock()
	return nil, err
}

func (w *waiter) before(o *waiter) bool {
	return w.due.Before(o.due) || w.due.Equal(o.due) && w.seq < o.seq
}

func (s *sched) remove(w *waiter) bool {
	for i, x := range s.waiting {
		if x == w {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return true
		}
	}
	return false
}

// pick returns the up replica (not exclude) with the fewest outstanding
// requests and a free slot, its slot taken; nil, nil when every candidate
// is full; an error when no candidate is up. Under s.mu.
func (s *sched) pick(now time.Time, exclude *replica) (*replica, error) {
	var best *replica
	up := 0
	var back time.Time // earliest return of an ejected candidate
	n := len(s.replicas)
	for k := range n {
		r := s.replicas[(s.next+k)%n]
		if r == exclude {
			continue
		}
		if r.ejected(now) {
			if back.IsZero() || r.ejectedTill.Before(back) {
				back = r.ejectedTill
			}
			continue
		}
		up++
		if r.outstanding < s.slots && (best == nil || r.outstanding < best.outstanding) {
			best = r
		}
	}
	switch {
	case best != nil:
		best.outstanding++
		s.next++
		return best, nil
	case up > 0:
		return nil, nil
	case exclude != nil:
		return nil, errNoOther
	}
	wait := int((back.Sub(now) + time.Second - 1) / time.Second)
	return nil, &BusyError{RetryAfter: max(wait, 1), Reason: "every upstream replica is ejected"}
}

// release gives r's slot back and records the attempt's outcome in its
// health; then it hands free slots to the earliest waiters.
func (s *sched) release(r *replica, c class, unhealthy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	r.outstanding--
	switch {
	case unhealthy:
		r.failures++
		if (r.probation || r.failures >= s.ejectAfter) && r.ejectedTill.IsZero() {
			r.ejectedTill = now.Add(s.ejectFor)
			r.failures, r.probation = 0, false
			r.stats.ejections.Add(1)
		}
	case c != classCancel:
		// It answered: it is up, whatever it said.
		r.failures, r.probation = 0, false
	}
	s.dispatch(now)
}

// dispatch grants slots to waiters in deadline order; a waiter that no
// replica can serve any more (all ejected) gets its error. Under s.mu.
func (s *sched) dispatch(now time.Time) {
	for i := 0; i < len(s.waiting); {
		w := s.waiting[i]
		r, err := s.pick(now, w.exclude)
		if r == nil && err == nil {
			if w.exclude == nil {
				return // every slot is taken
			}
			i++ // a later waiter may take what this one excludes
			continue
		}
		w.grant <- grant{r, err}
		s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
	}
}

// ReplicaState is one replica's state and totals, for readiness and
// metrics.
type ReplicaState struct {
	URL         string // the configured URL, any password hidden
	State       string // "up" or "ejected"
	Outstanding int    // requests holding a slot now
	Requests    uint64 // attempts sent (a retry counts on the replica that took it)
	Retries     uint64 // attempts that were retries of a failure elsewhere
	Ejections   uint64
	// Errors by class: ErrBusy (429, 503, refused), ErrInvalidInput (400,
	// 404, 413, 422) and the rest (upstream_error).
	ErrorsBusy, ErrorsInvalid, ErrorsUpstream uint64
	// StaleRetries: attempts resent at once because a kept-alive
	// connection turned out closed.
	StaleRetries uint64
	Completed    uint64 // sentences fully streamed
	Cancelled    uint64 // attempts stopped by the caller
}

func (s *sched) states() []ReplicaState {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	out := make([]ReplicaState, len(s.replicas))
	for i, r := range s.replicas {
		state := "up"
		if r.ejected(now) {
			state = "ejected"
		}
		out[i] = ReplicaState{URL: r.display, State: state, Outstanding: r.outstanding,
			Requests: r.stats.requests.Load(), Retries: r.stats.retries.Load(), Ejections: r.stats.ejections.Load(),
			ErrorsBusy: r.stats.errBusy.Load(), ErrorsInvalid: r.stats.errInvalid.Load(),
			ErrorsUpstream: r.stats.errUpstream.Load(), StaleRetries: r.stats.staleRetries.Load(),
			Completed: r.stats.completed.Load(), Cancelled: r.stats.cancelled.Load()}
	}
	return out
}
