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
//
// It also keeps workspace aliases, (workspace, alias) -> voice id, misses
// included (a catalog alias is looked up as a workspace alias first), under
// the same live/ttl rule; "alias" events of the feed drop a workspace's
// (InvalidateWorkspaceAliases).
type VoiceCache struct {
	ttl  int64 // ms
	live atomic.Bool

	mu  sync.RWMutex
	gen uint64 // bumped by every invalidation; guarded by mu
	m   map[string]voiceEntry

	// agen is gen for aliases; guarded by mu, as are aliases and nAliases.
	agen     uint64
	aliases  map[string]map[string]aliasEntry // workspace -> alias ->
	nAliases int
}

// aliasEntry is a resolved workspace alias; id "" caches "no such alias".
type aliasEntry struct {
	id string
	at int64
}

// maxCachedAliases bounds the alias entries, misses included, as
// maxCachedVoices bounds voices.
const maxCachedAliases = 50_000

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
	return &VoiceCache{ttl: ttl.Milliseconds(), m: make(map[string]voiceEntry),
		aliases: make(map[string]map[string]aliasEntry)}
}

// Get returns the voice with id from the cache, or from the store on a miss
// or when stale. ENotFound from the store is returned as is.
func (c *VoiceCache) Get(store VoiceStore, id string) (*control.Voice, error) {
	return c.get(store, id, time.Now().UnixMilli())
}

// get is Get at now (epoch ms): a lookup reads the clock once for all its
// steps (a clock read costs about as much as a cache hit).
func (c *VoiceCache) get(store VoiceStore, id string, now int64) (*control.Voice, error) {
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
	c.agen++
	c.aliases = make(map[string]map[string]aliasEntry)
	c.nAliases = 0
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

// AliasResolver is where workspace aliases are read on a cache miss.
type AliasResolver interface {
	// ResolveVoiceAlias returns the voice id ws calls alias; ENotFound
	// when none.
	ResolveVoiceAlias(ctx context.Context, ws, alias string) (string, error)
}

// ResolveAlias returns the id of the voice workspace ws calls alias, or ""
// when ws has no such alias, from the cache or, on a miss or when stale,
// from the store. A miss is cached as well: every catalog alias is looked
// up here first.
func (c *VoiceCache) ResolveAlias(store AliasResolver, ws, alias string) (string, error) {
	return c.resolveAlias(store, ws, alias, time.Now().UnixMilli())
}

// resolveAlias is ResolveAlias at now (epoch ms).
func (c *VoiceCache) resolveAlias(store AliasResolver, ws, alias string, now int64) (string, error) {
	live := c.live.Load()
	c.mu.RLock()
	e, ok := c.aliases[ws][alias]
	gen := c.agen
	c.mu.RUnlock()
	if live && ok && now-e.at < c.ttl {
		return e.id, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	id, err := store.ResolveVoiceAlias(ctx, ws, alias)
	cancel()
	if err != nil && !control.IsCode(err, control.ENotFound) {
		return "", err
	}
	if err != nil {
		id = ""
	}
	if live {
		c.putAlias(ws, alias, id, gen, now)
	}
	return id, nil
}

// putAlias stores an alias entry unless an alias invalidation happened
// since gen was read.
func (c *VoiceCache) putAlias(ws, alias, id string, gen uint64, now int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.agen != gen {
		return
	}
	if c.nAliases >= maxCachedAliases {
		c.aliases = make(map[string]map[string]aliasEntry)
		c.nAliases = 0
	}
	m := c.aliases[ws]
	if m == nil {
		m = make(map[string]aliasEntry)
		c.aliases[ws] = m
	}
	if _, ok := m[alias]; !ok {
		c.nAliases++
	}
	m[alias] = aliasEntry{id: id, at: now}
}

// InvalidateWorkspaceAliases drops every cached alias of workspace ws,
// misses included: its aliases changed here, or the change feed reported an
// "alias" change (control.ChangeAlias, whose ID is the workspace).
func (c *VoiceCache) InvalidateWorkspaceAliases(ws string) {
	c.mu.Lock()
	c.agen++
	c.nAliases -= len(c.aliases[ws])
	delete(c.aliases, ws)
	c.mu.Unlock()
}
