package gateway

import (
	"context"
	"strings"
	"sync"
	"time"

	"voicesvc/control"
	"voicesvc/web"
)

// wsRegistry knows every open WebSocket session of this server by the API
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
type wsRegistry struct {
	mu    sync.Mutex
	byKey map[string]*keySessions
	all   map[web.Session]struct{}
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
	sessions  map[web.Session]struct{}
}

// recentWindow is how long a key change is remembered for registrations
// racing it: far longer than a handshake takes.
const recentWindow = 30 * time.Second

func newWSRegistry(isRevoked func(string) bool) *wsRegistry {
	return &wsRegistry{byKey: map[string]*keySessions{}, all: map[web.Session]struct{}{},
		recent: map[string]time.Time{}, isRevoked: isRevoked}
}

// add registers x, which authenticated at authAt with the key keyID (""
// for none) expiring at expiresAt. A session that registers while the
// server drains is drained at once; one whose key changed since authAt
// has its key checked before it runs.
func (r *wsRegistry) add(x web.Session, keyID string, expiresAt int64, authAt time.Time) {
	r.mu.Lock()
	r.all[x] = struct{}{}
	if r.draining {
		x.Drain()
	}
	changed := false
	if keyID != "" {
		ks := r.byKey[keyID]
		if ks == nil {
			ks = &keySessions{expiresAt: expiresAt, sessions: map[web.Session]struct{}{}}
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

// remove forgets x once its Run has returned.
func (r *wsRegistry) remove(x web.Session, keyID string) {
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

// keyChanged and recheck are no-ops without the WebSocket route.
func (w *wsState) keyChanged(keyID string) {
	if w != nil {
		w.reg.keyChanged(keyID)
	}
}

func (w *wsState) recheck() {
	if w != nil {
		w.reg.recheck()
	}
}

// keyChanged is called from the change feed for every key change: if the
// key has open sessions here and the store says it is revoked, expired or
// gone, they are ended. Keys without sessions cost a map lookup.
func (r *wsRegistry) keyChanged(keyID string) {
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

// recheck asks the store about every key with open sessions: after the
// change feed was down, changes may have been missed.
func (r *wsRegistry) recheck() {
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
func (r *wsRegistry) revoke(keyID string) {
	r.mu.Lock()
	var xs []web.Session
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
func (r *wsRegistry) armLocked(at int64) {
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
func (r *wsRegistry) expire() {
	now := time.Now().UnixMilli()
	var xs []web.Session
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

// drain starts the graceful end of every session, present and future.
func (r *wsRegistry) drain() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining = true
	for x := range r.all {
		x.Drain()
	}
}

// stop releases the expiry timer.
func (r *wsRegistry) stop() {
	r.mu.Lock()
	if r.timer != nil {
		r.timer.Stop()
	}
	r.mu.Unlock()
}

// keyRevoked reads whether the key keyID may no longer be used: revoked,
// expired or deleted. A store error counts as usable (the next change or
// expiry decides), so that a store hiccup does not close every session.
func (s *Server) keyRevoked(keyID string) bool {
	if strings.HasPrefix(keyID, dashboardKeyPrefix) {
		// A token minted by a dashboard session: the session is not an API
		// key, and signing out ends the page, not its open sockets
		// (docs/api.md#dashboard-sessions).
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k, err := s.store.GetAPIKey(ctx, keyID)
	if control.IsCode(err, control.ENotFound) {
		return true
	}
	if err != nil {
		s.log.Warn("websocket key check failed", "key_id", keyID, "err", err)
		return false
	}
	return k.Check(control.NowMS()) != nil
}
