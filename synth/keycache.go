package synth

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/allegro/bigcache/v3"

	"voicesvc/control"
)

// keyCache serves API-key lookups from memory: bigcache keyed by the key's
// SHA-256, holding a compact binary record of the key and its workspace's
// effective limits. The store is read only on a miss. Any key or workspace
// change on the change feed resets the whole cache: such changes are rare,
// and a reset is the one invalidation that needs no index by key id.
type keyCache struct {
	bc          *bigcache.BigCache
	ttl, negTTL int64 // ms
	// live is true while the change feed runs; without it nothing is
	// trusted from the cache, because nothing would tell it about a
	// revocation.
	live atomic.Bool
	// gen guards fills against resets: a lookup that read the store before
	// a reset must not store its (possibly stale) answer after it.
	mu  sync.RWMutex
	gen atomic.Uint64
}

// KeyCacheConfig sizes the API-key cache: MB of memory; TTL, how long a
// cached key is trusted even if the change feed stayed silent; NegativeTTL,
// how long an unknown key is remembered as unknown.
type KeyCacheConfig struct {
	MB               int
	TTL, NegativeTTL time.Duration
}

func newKeyCache(cfg KeyCacheConfig) (*keyCache, error) {
	if cfg.MB <= 0 {
		cfg.MB = 64
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 5 * time.Minute
	}
	if cfg.NegativeTTL <= 0 {
		cfg.NegativeTTL = 2 * time.Second
	}
	bc := bigcache.DefaultConfig(cfg.TTL)
	bc.Shards = 64
	bc.MaxEntriesInWindow = 10_000
	bc.MaxEntrySize = 256
	bc.HardMaxCacheSize = cfg.MB
	bc.CleanWindow = time.Minute
	bc.Verbose = false
	c, err := bigcache.New(context.Background(), bc)
	if err != nil {
		return nil, err
	}
	return &keyCache{bc: c, ttl: cfg.TTL.Milliseconds(), negTTL: cfg.NegativeTTL.Milliseconds()}, nil
}

func (c *keyCache) reset() {
	c.mu.Lock()
	c.gen.Add(1)
	_ = c.bc.Reset()
	c.mu.Unlock()
}

func (c *keyCache) close() { _ = c.bc.Close() }

// Record layout. Fixed part, then four length-prefixed strings: key id,
// workspace id, plan, billing mode.
const (
	recKey     = 1 // a key and its workspace
	recUnknown = 2 // no such key (negative entry)

	offKind     = 0
	offAt       = 1  // cachedAt, epoch ms
	offFlags    = 9  // flagLegacy | flagRevoked | flagStreaming
	offScopes   = 10 //
	offExpires  = 11 // epoch ms
	offConc     = 19 // int32
	offRPS      = 23 // int32
	offSessions = 27 // int32
	offMonthly  = 31 // int64
	offHash     = 39 // sha256, 32 bytes
	offStrings  = 71

	flagLegacy    = 1
	flagRevoked   = 2
	flagStreaming = 4
)

// lookup returns the principal of the key with this hash; nil when there is
// no such key (or its workspace is gone); errUnauthorized when revoked and
// errKeyExpired when expired.
func (c *keyCache) lookup(store KeyStore, hash *[32]byte, billing string) (*control.Principal, error) {
	now := time.Now().UnixMilli()
	live := c.live.Load()
	if live {
		if rec, err := c.bc.Get(string(hash[:])); err == nil {
			if p, ok, err := c.decode(rec, hash, now); ok {
				return p, err
			}
		}
	}
	g := c.gen.Load()
	rec, err := fetchKey(store, hash, billing, now)
	if err != nil {
		return nil, err
	}
	if live {
		c.mu.RLock()
		if c.gen.Load() == g {
			_ = c.bc.Set(string(hash[:]), rec)
		}
		c.mu.RUnlock()
	}
	p, _, err := c.decode(rec, hash, now)
	return p, err
}

// fetchKey reads a key and its workspace from the store as a record.
func fetchKey(store KeyStore, hash *[32]byte, billing string, now int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h := append([]byte(nil), hash[:]...)
	k, err := store.GetAPIKeyByHash(ctx, h)
	if control.IsCode(err, control.ENotFound) || err == nil && !control.SameHash(k.Hash, h) {
		return unknownRecord(now), nil
	}
	if err != nil {
		return nil, err
	}
	ws, err := store.GetWorkspace(ctx, k.WorkspaceID)
	if control.IsCode(err, control.ENotFound) {
		return unknownRecord(now), nil
	}
	if err != nil {
		return nil, err
	}
	return encodeKey(k, ws, billing, now), nil
}

func unknownRecord(now int64) []byte {
	rec := make([]byte, offFlags)
	rec[offKind] = recUnknown
	binary.LittleEndian.PutUint64(rec[offAt:], uint64(now))
	return rec
}

func encodeKey(k *control.APIKey, ws *control.Workspace, billing string, now int64) []byte {
	l := ws.Limits(billing)
	rec := make([]byte, offStrings, offStrings+len(k.ID)+len(ws.ID)+len(ws.Plan)+len(l.Billing)+4)
	rec[offKind] = recKey
	le := binary.LittleEndian
	le.PutUint64(rec[offAt:], uint64(now))
	var flags byte
	if k.Legacy {
		flags |= flagLegacy
	}
	if k.RevokedAt != 0 {
		flags |= flagRevoked
	}
	if l.Streaming {
		flags |= flagStreaming
	}
	rec[offFlags] = flags
	rec[offScopes] = byte(control.ScopesOf(k.Scopes))
	le.PutUint64(rec[offExpires:], uint64(k.ExpiresAt))
	le.PutUint32(rec[offConc:], uint32(int32(l.Concurrency)))
	le.PutUint32(rec[offRPS:], uint32(int32(l.RPS)))
	le.PutUint32(rec[offSessions:], uint32(int32(l.Sessions)))
	le.PutUint64(rec[offMonthly:], uint64(l.MonthlyChars))
	copy(rec[offHash:offHash+32], k.Hash)
	for _, s := range []string{k.ID, ws.ID, ws.Plan, l.Billing} {
		if len(s) > 255 {
			s = s[:255]
		}
		rec = append(rec, byte(len(s)))
		rec = append(rec, s...)
	}
	return rec
}

var errCorrupt = errors.New("synth: corrupt key cache record")

// decode turns a record into a principal. ok is false when the record is
// too old to trust (or unreadable), meaning: ask the store. rec must be a
// private copy: the principal's strings point into it.
func (c *keyCache) decode(rec []byte, hash *[32]byte, now int64) (p *control.Principal, ok bool, err error) {
	if len(rec) < offFlags {
		return nil, false, errCorrupt
	}
	le := binary.LittleEndian
	age := now - int64(le.Uint64(rec[offAt:]))
	switch rec[offKind] {
	case recUnknown:
		return nil, age < c.negTTL, nil
	case recKey:
		if age >= c.ttl || len(rec) < offStrings {
			return nil, false, nil
		}
	default:
		return nil, false, errCorrupt
	}
	if !control.SameHash(rec[offHash:offHash+32], hash[:]) {
		return nil, false, nil
	}
	flags := rec[offFlags]
	if flags&flagRevoked != 0 {
		return nil, true, errUnauthorized
	}
	expires := int64(le.Uint64(rec[offExpires:]))
	if expires != 0 && expires <= now {
		return nil, true, errKeyExpired
	}
	// One string over the whole record; the fields are slices of it.
	all := unsafe.String(&rec[0], len(rec))
	var strs [4]string
	i := offStrings
	for n := range strs {
		if i >= len(rec) {
			return nil, false, errCorrupt
		}
		l := int(rec[i])
		i++
		if i+l > len(rec) {
			return nil, false, errCorrupt
		}
		strs[n] = all[i : i+l]
		i += l
	}
	p = &control.Principal{
		KeyID:       strs[0],
		WorkspaceID: strs[1],
		Plan:        strs[2],
		Scopes:      control.Scopes(rec[offScopes]),
		ExpiresAt:   expires,
		Legacy:      flags&flagLegacy != 0,
		Limits: control.Limits{
			Concurrency:  int(int32(le.Uint32(rec[offConc:]))),
			RPS:          int(int32(le.Uint32(rec[offRPS:]))),
			Sessions:     int(int32(le.Uint32(rec[offSessions:]))),
			MonthlyChars: int64(le.Uint64(rec[offMonthly:])),
			Streaming:    flags&flagStreaming != 0,
			Billing:      strs[3],
		},
	}
	return p, true, nil
}
