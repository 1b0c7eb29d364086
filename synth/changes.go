package synth

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

// Follow follows the store's change feed until ctx ends, so that
// revocations, plan changes and voice edits made by any process reach the
// core's caches (keys, voices, aliases) within the feed's delay (under 2
// seconds). While the feed is down the caches are bypassed rather than
// trusted. keyChanged hears of each changed key (the server ends the open
// sessions of a revoked one); recheck, of a time when any key may have
// changed unseen (the feed resumed, or an unknown change).
func (s *Service) Follow(ctx context.Context, feed control.ChangeFeed, keyChanged func(id string), recheck func()) {
	var mu sync.Mutex
	epoch := 0
	onChange := func(ch control.Change) {
		switch ch.Kind {
		case "voice":
			s.voices.Invalidate(ch.ID)
		case control.ChangeAlias: // a workspace's voice names (ID: the workspace)
			s.voices.InvalidateWorkspaceAliases(ch.ID)
		case "token":
			// tokens are single-use and never cached
		case "key":
			s.ResetKeys()
			keyChanged(ch.ID)
		case "workspace":
			s.ResetKeys()
		default:
			s.ResetKeys()
			s.voices.Reset()
			recheck()
		}
	}
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
				recheck()
			}
		})
		err := feed.WatchChanges(ctx, onChange)
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

// setCachesLive resets the caches and then trusts them (or not): anything
// cached while the feed was not known to run may have missed an event.
func (s *Service) setCachesLive(live bool) {
	s.SetKeysLive(live)
	s.voices.SetLive(live)
}
