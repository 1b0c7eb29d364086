package synth

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"voicesvc/control"
)

// VoiceCache keeps recently read voices in memory so that GET /voices/{id}
// and every synthesis do not read the store on every request. Cached
// voices are shared: callers must treat them as read-only. This server's own
// writes invalidate at once; other processes' writes arrive through the
// change feed ("voice" events), and ttl bounds staleness for changes the
// feed does not carry (a job runner finishing a clone on another server).
type VoiceCache struct {
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

// NewVoiceCache makes a cache that trusts an entry for ttl. It answers
// from the store alone until SetLive(true): the change feed that keeps it
// right runs.
func NewVoiceCache(ttl time.Duration) *VoiceCache {
	return &VoiceCache{ttl: ttl.Milliseconds(), m: make(map[string]voiceEntry)}
}

// Get returns the voice with id from the cache, or from the store on a miss
// or when stale. ENotFound from the store is returned as is.
func (c *VoiceCache) Get(store VoiceStore, id string) (*control.Voice, error) {
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
func (c *VoiceCache) put(v *control.Voice, gen uint64, now int64) {
	c.mu.Lock()
	if c.gen == gen {
		if len(c.m) >= maxCachedVoices {
			c.m = make(map[string]voiceEntry)
		}
		c.m[v.ID] = voiceEntry{v: v, at: now}
	}
	c.mu.Unlock()
}

// Invalidate drops the voice id (changed here or reported by the feed).
func (c *VoiceCache) Invalidate(id string) {
	c.mu.Lock()
	c.gen++
	delete(c.m, id)
	c.mu.Unlock()
}

// Reset drops every entry.
func (c *VoiceCache) Reset() {
	c.mu.Lock()
	c.gen++
	c.m = make(map[string]voiceEntry)
	c.mu.Unlock()
}

// SetLive resets the cache and then trusts it (or not): anything cached
// while the change feed was not known to run may have missed an event.
func (c *VoiceCache) SetLive(live bool) {
	c.live.Store(live)
	c.Reset()
}

// Live reports whether the cache is trusted (the change feed runs).
func (c *VoiceCache) Live() bool { return c.live.Load() }
