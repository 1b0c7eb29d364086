package gateway

import (
	"context"
	"strings"
	"time"

	"voicesvc/control"
)

// The registry of open sessions by key (sessions.Registry) ends the
// sessions of a revoked or expired key; these are the server's ends of it.

// keyChanged and recheck are no-ops without the WebSocket route.
func (w *wsState) keyChanged(keyID string) {
	if w != nil {
		w.reg.KeyChanged(keyID)
	}
}

func (w *wsState) recheck() {
	if w != nil {
		w.reg.Recheck()
	}
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
