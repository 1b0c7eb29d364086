package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
)

// voiceCache keeps recently read voices in memory so that GET /voices/{id}
// and the synthesis routes do not read the store on every request. Cached
// voices are shared: callers must treat them as read-only. This server's own
// writes invalidate at once; other processes' writes arrive through the
// change feed ("voice" events), and ttl bounds staleness for changes the
// feed does not carry (a job runner finishing a clone on another server).
type voiceCache struct {
	ttl  int64 // ms
	live atomic.Bool

	mu  sync.RWMutex
	gen uint64 // bumped by every invalidation; guarded by mu
	m   map[string]voiceEntry
}

type voiceEntry struct {
	v  *control.Voice
	at int64
}

// maxCachedVoices bounds memory; when full the cache starts over, which is
// cheaper than LRU bookkeeping on every hit.
const maxCachedVoices = 50_000

func newVoiceCache(ttl time.Duration) *voiceCache {
	return &voiceCache{ttl: ttl.Milliseconds(), m: make(map[string]voiceEntry)}
}

// get returns the voice with id from the cache, or from the store on a miss
// or when stale. ENotFound from the store is returned as is.
func (c *voiceCache) get(store control.VoiceService, id string) (*control.Voice, error) {
	now := time.Now().UnixMilli()
	live := c.live.Load()
	c.mu.RLock()
	e, ok := c.m[id]
	gen := c.gen
	c.mu.RUnlock()
	if live && ok && now-e.at < c.ttl {
		return e.v, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	v, err := store.GetVoice(ctx, id)
	cancel()
	if err != nil {
		return nil, err
	}
	if live {
		c.put(v, gen, now)
	}
	return v, nil
}

// put stores v unless an invalidation happened since gen was read.
func (c *voiceCache) put(v *control.Voice, gen uint64, now int64) {
	c.mu.Lock()
	if c.gen == gen {
		if len(c.m) >= maxCachedVoices {
			c.m = make(map[string]voiceEntry)
		}
		c.m[v.ID] = voiceEntry{v: v, at: now}
	}
	c.mu.Unlock()
}

func (c *voiceCache) invalidate(id string) {
	c.mu.Lock()
	c.gen++
	delete(c.m, id)
	c.mu.Unlock()
}

func (c *voiceCache) reset() {
	c.mu.Lock()
	c.gen++
	c.m = make(map[string]voiceEntry)
	c.mu.Unlock()
}

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
	defer s.keys.close()
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
	s.keys.live.Store(live)
	s.voices.live.Store(live)
	s.keys.reset()
	s.voices.reset()
}

func (s *Server) onChange(ch control.Change) {
	switch ch.Kind {
	case "voice":
		s.voices.invalidate(ch.ID)
	case "token":
		// tokens are single-use and never cached
	case "key":
		s.keys.reset()
		s.ws.keyChanged(ch.ID) // open sessions of a revoked key end
	case "workspace":
		s.keys.reset()
	default:
		s.keys.reset()
		s.voices.reset()
		s.ws.recheck()
	}
}
