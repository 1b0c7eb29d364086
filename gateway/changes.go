package gateway

import (
	"context"
	"sync"
	"time"

	"voicesvc/control"
)

// feedSettle is how long the change feed must have been running before the
// caches are trusted. WatchChanges reports changes made after it took its
// starting point, and gives no signal when that was; an entry cached before
// it could miss a change forever. WatchChanges takes that point at once, so
// a short wait makes it certain in practice; until then lookups go to the
// store, which is always right.
const feedSettle = 500 * time.Millisecond

// watchChanges follows the store's change feed for the life of the server,
// so that revocations, plan changes and voice edits made by any process
// reach this server's caches within the feed's delay (under 2 seconds).
// While the feed is down the caches are bypassed rather than trusted.
func (s *Server) watchChanges(ctx context.Context) {
	defer close(s.watchDone)
	defer s.core.Close()
	var mu sync.Mutex
	epoch := 0
	for {
		mu.Lock()
		epoch++
		e := epoch
		mu.Unlock()
		trust := time.AfterFunc(feedSettle, func() {
			mu.Lock()
			live := epoch == e // the feed this timer belongs to is still running
			if live {
				s.setCachesLive(true)
			}
			mu.Unlock()
			if live {
				// Revocations made while the feed was down were not seen.
				s.ws.recheck()
			}
		})
		err := s.store.WatchChanges(ctx, s.onChange)
		trust.Stop()
		mu.Lock()
		epoch++
		s.setCachesLive(false)
		mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("change feed stopped; caches bypassed until it resumes", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// setCachesLive resets both caches and then trusts them (or not): anything
// cached while the feed was not known to run may have missed an event.
func (s *Server) setCachesLive(live bool) {
	s.core.SetKeysLive(live)
	s.core.Voices().SetLive(live)
}

func (s *Server) onChange(ch control.Change) {
	switch ch.Kind {
	case "voice":
		s.core.Voices().Invalidate(ch.ID)
	case control.ChangeAlias: // a workspace's voice names (ID: the workspace)
		s.core.Voices().InvalidateWorkspaceAliases(ch.ID)
	case "token":
		// tokens are single-use and never cached
	case "key":
		s.core.ResetKeys()
		s.ws.keyChanged(ch.ID) // open sessions of a revoked key end
	case "workspace":
		s.core.ResetKeys()
		if s.leases != nil {
			s.leases.Invalidate(ch.ID) // after the keys: the next request brings the new limits
		}
	default:
		s.core.ResetKeys()
		s.core.Voices().Reset()
		s.ws.recheck()
	}
}
