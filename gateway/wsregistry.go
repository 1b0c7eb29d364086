package gateway

// The registry of open sessions by key (sessions.Registry) ends the
// sessions of a revoked or expired key (the core's KeyRevoked); these are
// the server's ends of it.

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
