package synth

import (
	"context"
	"crypto/sha256"
	"strings"
	"unsafe"

	"voicesvc/control"
)

// Credentials: the first step of the core. Every protocol finds a
// credential in its own forms (a header, a query parameter, a WebSocket
// subprotocol) and asks the core who it is: an API key (AuthKey) or an
// access token (AuthToken). Both answer from the key cache on the hot
// path; the change feed resets it (ResetKeys) on any key or workspace
// change, so a revocation reaches every server within the feed's delay.

var (
	errUnauthorized = control.Errorf(control.EUnauthorized, "missing or invalid API key")
	errKeyExpired   = control.Errorf(control.EKeyExpired, "API key expired")
)

// KeyStore is what the key cache and the tokens read on a miss.
type KeyStore interface {
	GetAPIKeyByHash(ctx context.Context, hash []byte) (*control.APIKey, error)
	GetAPIKey(ctx context.Context, id string) (*control.APIKey, error)
	GetWorkspace(ctx context.Context, id string) (*control.Workspace, error)
	GetTokenByHash(ctx context.Context, hash []byte) (*control.AccessToken, error)
}

// AuthKey resolves an API key: format check, SHA-256, then the key cache,
// which goes to the store only on a miss. Unknown, malformed or revoked:
// 401 unauthorized; expired: 401 key_expired.
func (s *Service) AuthKey(key []byte) (*control.Principal, error) {
	if !control.ValidAPIKeyFormat(unsafe.String(unsafe.SliceData(key), len(key))) {
		return nil, errUnauthorized
	}
	hash := sha256.Sum256(key)
	p, err := s.keys.lookup(s.store, &hash, s.billing)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, errUnauthorized
	}
	return p, nil
}

// SetKeysLive resets the key cache and then trusts it (or not): the
// change feed runs (or stopped).
func (s *Service) SetKeysLive(live bool) {
	s.keys.live.Store(live)
	s.keys.reset()
}

// ResetKeys drops every cached key (a key or workspace changed).
func (s *Service) ResetKeys() { s.keys.reset() }

// Close frees the key cache.
func (s *Service) Close() { s.keys.close() }

// AuthToken authenticates an access token: the principal of its
// workspace, with the token attached (tts only, its voice_ids). It does not
// consume the token: Admit does, once the request is let through.
func (s *Service) AuthToken(cred []byte) (*control.Principal, error) {
	if !control.ValidAccessTokenFormat(unsafe.String(unsafe.SliceData(cred), len(cred))) {
		return nil, errTokenUsed
	}
	sum := sha256.Sum256(cred)
	c, cancel := s.call(context.Background())
	defer cancel()
	t, err := s.store.GetTokenByHash(c, sum[:])
	if err != nil {
		return nil, err // ETokenInvalid when unknown
	}
	now := control.NowMS()
	if !control.SameHash(t.Hash, sum[:]) || t.ConsumedAt != 0 || t.ExpiresAt <= now {
		return nil, errTokenUsed
	}
	p, err := s.tokenKeyState(c, t, now)
	if err != nil {
		return nil, err
	}
	p.Token = t
	return p, nil
}

// tokenKeyState resolves the token's creating key and workspace. A revoked,
// expired or deleted key makes the token unusable (401 token_invalid). The
// key is read fresh by id (tokens are single use, so this is one read per
// token), and its principal comes from the key cache, which a revocation or
// plan change resets through the change feed.
func (s *Service) tokenKeyState(c context.Context, t *control.AccessToken, now int64) (*control.Principal, error) {
	if strings.HasPrefix(t.KeyID, control.DashboardKeyPrefix) {
		return s.dashboardTokenState(c, t)
	}
	k, err := s.store.GetAPIKey(c, t.KeyID)
	if control.IsCode(err, control.ENotFound) {
		return nil, errTokenUsed
	}
	if err != nil {
		return nil, err
	}
	if k.Check(now) != nil || k.WorkspaceID != t.WorkspaceID || len(k.Hash) != sha256.Size {
		return nil, errTokenUsed
	}
	var h [sha256.Size]byte
	copy(h[:], k.Hash)
	kp, err := s.keys.lookup(s.store, &h, s.billing)
	if err != nil || kp == nil {
		if err == nil || control.IsCode(err, control.EUnauthorized) || control.IsCode(err, control.EKeyExpired) {
			return nil, errTokenUsed
		}
		return nil, err
	}
	return &control.Principal{WorkspaceID: kp.WorkspaceID, KeyID: kp.KeyID, Plan: kp.Plan,
		ExpiresAt: kp.ExpiresAt, Limits: kp.Limits}, nil
}

// dashboardTokenState resolves a token the dashboard minted with its
// session: the workspace alone. Its lifetime was capped by the session's,
// and signing out does not reach it: the dashboard mints tokens of a
// minute, each good for one socket. ExpiresAt, the expiry of the key
// behind a principal, is 0: there is no key, and a socket opened with the
// token lives on after the token's minute, as with any token.
func (s *Service) dashboardTokenState(c context.Context, t *control.AccessToken) (*control.Principal, error) {
	ws, err := s.store.GetWorkspace(c, t.WorkspaceID)
	if control.IsCode(err, control.ENotFound) {
		return nil, errTokenUsed
	}
	if err != nil {
		return nil, err
	}
	return &control.Principal{WorkspaceID: ws.ID, KeyID: t.KeyID, Plan: ws.Plan, Limits: ws.Limits(s.billing)}, nil
}

// KeysLive reports whether the key cache is trusted (the feed runs).
func (s *Service) KeysLive() bool { return s.keys.live.Load() }

// CachedKeys is how many keys (and unknown hashes) the cache holds.
func (s *Service) CachedKeys() int { return s.keys.bc.Len() }
