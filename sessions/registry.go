package sessions

import (
	"sync"
	"time"
)

// Endable is a session as the registry ends it (Session, and the
// dialects' sessions).
type Endable interface {
	// Revoke ends it because its credentials were revoked or expired.
	Revoke()
	// Drain ends it once its open work is done (shutdown).
	Drain()
}

// Registry knows every open WebSocket session of this server by the API
// key it acts for (its own key, or the key that created its access token),
// so that a key revoked or expired while sessions run ends them: a fatal
// error unauthorized and close 4401 within the change feed's delay (under
// 2 seconds), on every server that shares the store. Before, a session
// authenticated once at its handshake and kept billing for as long as it
// stayed open.
//
// It adds no goroutine or timer per session (an idle session must cost
// none): revocations arrive on the change feed's goroutine (keyChanged),
// expiries on one server-wide timer armed for the earliest expiry among
// the open sessions' keys. It also drives the drain at shutdown.
type Registry struct {
	mu    sync.Mutex
	byKey map[string]*keySessions
	all   map[Endable]struct{}
	// recent holds the keys changed lately, with when: a change that lands
	// between a handshake's credential check and its registration would
	// otherwise be missed, so such a session checks its key once.
	recent   map[string]time.Time
	timer    *time.Timer // fires at timerAt, the earliest key expiry
	timerAt  int64       // epoch ms; 0: not armed
	draining bool
	// isRevoked reads a key's state from the store (Server.keyRevoked).
	isRevoked func(keyID string) bool
}

type keySessions struct {
	expiresAt int64 // epoch ms; 0: never
	sessions  map[Endable]struct{}
}

// recentWindow is how long a key change is remembered for registrations
// racing it: far longer than a handshake takes.
const recentWindow = 30 * time.Second

// NewRegistry makes the registry; isRevoked reads a key's state from the
// store (true: revoked, expired or deleted).
func NewRegistry(isRevoked func(string) bool) *Registry {
	return &Registry{byKey: map[string]*keySessions{}, all: map[Endable]struct{}{},
		recent: map[string]time.Time{}, isRevoked: isRevoked}
}

// Add registers x, which authenticated at authAt with the key keyID (""
// for none) expiring at expiresAt. A session that registers while the
// server drains is drained at once; one whose key changed since authAt
// has its key checked before it runs.
func (r *Registry) Add(x Endable, keyID string, expiresAt int64, authAt time.Time) {
	r.mu.Lock()
	r.all[x] = struct{}{}
	if r.draining {
		x.Drain()
	}
	changed := false
	if keyID != "" {
		ks := r.byKey[keyID]
		if ks == nil {
			ks = &keySessions{expiresAt: expiresAt, sessions: map[Endable]struct{}{}}
			r.byKey[keyID] = ks
		}
		ks.sessions[x] = struct{}{}
		if at, ok := r.recent[keyID]; ok && !at.Before(authAt) {
			changed = true
		}
		r.armLocked(expiresAt)
	}
	r.mu.Unlock()
	if changed && r.isRevoked(keyID) {
		x.Revoke()
	}
}

// Remove forgets x once its Run has returned.
func (r *Registry) Remove(x Endable, keyID string) {
	r.mu.Lock()
	delete(r.all, x)
	if ks := r.byKey[keyID]; ks != nil {
		delete(ks.sessions, x)
		if len(ks.sessions) == 0 {
			delete(r.byKey, keyID)
		}
	}
	r.mu.Unlock()
}

// KeyChanged is called from the change feed for every key change: if the
// key has open sessions here and the store says it is revoked, expired or
// gone, they are ended. Keys without sessions cost a map lookup.
func (r *Registry) KeyChanged(keyID string) {
	r.mu.Lock()
	now := time.Now()
	r.recent[keyID] = now
	if len(r.recent) > 1024 {
		for id, at := range r.recent {
			if now.Sub(at) > recentWindow {
				delete(r.recent, id)
			}
		}
	}
	_, open := r.byKey[keyID]
	r.mu.Unlock()
	if open && r.isRevoked(keyID) {
		r.revoke(keyID)
	}
}

// Recheck asks the store about every key with open sessions: after the
// change feed was down, changes may have been missed.
func (r *Registry) Recheck() {
	r.mu.Lock()
	ids := make([]string, 0, len(r.byKey))
	for id := range r.byKey {
		ids = append(ids, id)
	}
	r.mu.Unlock()
	for _, id := range ids {
		if r.isRevoked(id) {
			r.revoke(id)
		}
	}
}

// revoke ends every session of keyID (they unregister as they end).
func (r *Registry) revoke(keyID string) {
	r.mu.Lock()
	var xs []Endable
	if ks := r.byKey[keyID]; ks != nil {
		for x := range ks.sessions {
			xs = append(xs, x)
		}
	}
	r.mu.Unlock()
	for _, x := range xs {
		x.Revoke()
	}
}

// armLocked makes the expiry timer fire no later than at (epoch ms).
func (r *Registry) armLocked(at int64) {
	if at == 0 || r.timerAt != 0 && r.timerAt <= at {
		return
	}
	r.timerAt = at
	d := time.Until(time.UnixMilli(at))
	if r.timer == nil {
		r.timer = time.AfterFunc(d, r.expire)
	} else {
		r.timer.Reset(d)
	}
}

// expire runs on the timer: it ends the sessions of every key that has
// expired and re-arms the timer for the next expiry.
func (r *Registry) expire() {
	now := time.Now().UnixMilli()
	var xs []Endable
	r.mu.Lock()
	r.timerAt = 0
	next := int64(0)
	for _, ks := range r.byKey {
		switch {
		case ks.expiresAt == 0:
		case ks.expiresAt <= now:
			for x := range ks.sessions {
				xs = append(xs, x)
			}
		case next == 0 || ks.expiresAt < next:
			next = ks.expiresAt
		}
	}
	r.armLocked(next)
	r.mu.Unlock()
	for _, x := range xs {
		x.Revoke()
	}
}

// Drain starts the graceful end of every session, present and future.
func (r *Registry) Drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining = true
	for x := range r.all {
		x.Drain()
	}
}

// Stop releases the expiry timer.
func (r *Registry) Stop() {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
}

// Len is the number of open sessions the registry knows.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}
