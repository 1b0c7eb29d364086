package gateway

import (
	"bytes"
	"crypto/sha256"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Principal is who a request acts for: a workspace, through one of its API
// keys or through an access token that key created. Handlers read it; they
// never see the secret.
type Principal struct {
	WorkspaceID string
	KeyID       string // the key used, or the key that created Token
	Scopes      Scopes
	ExpiresAt   int64 // of the key; 0 = never
	Legacy      bool
	Plan        string
	// Limits are the workspace's effective plan limits and billing mode
	// (overrides and the server's default applied) as of the last change.
	Limits control.Limits
	// Token is set when the request authenticated with an access token
	// (`Authorization: Bearer vst_...`): its grant is tts only and
	// Token.VoiceIDs, when not empty, restricts the voices it may use.
	Token *control.AccessToken
	// Session is set when the request authenticated with the dashboard's
	// session cookie (session.go); KeyID is then "dashboard:" + its id.
	Session bool
}

// Scopes is a set of scopes as a bit mask, so that a scope check on the hot
// path is one AND and a Principal carries no slice.
type Scopes uint8

const (
	scopeVoicesRead Scopes = 1 << iota
	scopeVoicesWrite
	scopeClone
	scopeTTS
)

// scopeBit maps a scope name to its bit; unknown names are 0 (no grant).
func scopeBit(name string) Scopes {
	switch name {
	case control.ScopeVoicesRead:
		return scopeVoicesRead
	case control.ScopeVoicesWrite:
		return scopeVoicesWrite
	case control.ScopeClone:
		return scopeClone
	case control.ScopeTTS:
		return scopeTTS
	}
	return 0
}

// ScopesOf converts a key's scope list.
func ScopesOf(names []string) Scopes {
	var s Scopes
	for _, n := range names {
		s |= scopeBit(n)
	}
	return s
}

// Has reports whether the set grants scope (a control.Scope* name).
func (s Scopes) Has(scope string) bool {
	b := scopeBit(scope)
	return b != 0 && s&b == b
}

// Has reports whether the principal may use scope. Legacy keys have all
// four scopes (docs/api.md#api-keys); tokens grant tts only (docs/api.md#access-tokens).
func (p *Principal) Has(scope string) bool {
	if p.Token != nil {
		return scope == control.ScopeTTS
	}
	if scope == scopeAnyKey {
		return true
	}
	return p.Legacy || p.Scopes.Has(scope)
}

var (
	hdrAPIKey        = []byte("X-API-Key")
	hdrAuthorization = []byte("Authorization")
	bearerPrefix     = []byte("Bearer ")
	errUnauthorized  = control.Errorf(control.EUnauthorized, "missing or invalid API key")
	errKeyExpired    = control.Errorf(control.EKeyExpired, "API key expired")
	errScope         = control.Errorf(control.EInsufficientScope, "the API key lacks the scope this endpoint requires")
)

// authenticate finds the principal of a request and checks the route's
// scope. X-API-Key wins over Authorization (docs/api.md#access-tokens order).
// Missing, malformed, unknown or revoked credentials are a plain 401; an
// expired key is 401 key_expired; a missing scope 403 insufficient_scope.
//
// The dashboard's session cookie (session.go) counts only when neither a
// key nor a token is sent, and never on the routes that take bearer keys
// (compat); the WebSocket authenticates on its own (wsAuthenticate) and
// does not read it.
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, rt *route) (*Principal, error) {
	if rt.scope == "" {
		return &Principal{}, nil
	}
	var p *Principal
	var err error
	if key := ctx.Request.Header.PeekBytes(hdrAPIKey); len(key) > 0 {
		p, err = s.authKey(key)
	} else {
		cred := bearer(ctx)
		switch {
		case len(cred) == 0 && !rt.bearerKeys && !hasAuthorization(ctx):
			p, err = s.sessionPrincipal(ctx)
		case len(cred) == 0:
			return nil, errUnauthorized
		case rt.bearerKeys && bytes.HasPrefix(cred, []byte(control.APIKeyPrefix)):
			p, err = s.authKey(cred)
		case s.tokenAuth != nil && bytes.HasPrefix(cred, []byte(control.AccessTokenPrefix)) &&
			(rt.tokens || rt.scope != control.ScopeTTS):
			// Tokens work on speak and stream (rt.tokens). Elsewhere a valid
			// token fails the scope check below (403 insufficient_scope:
			// listing, creating, cloning), except on the other tts routes
			// (POST /tokens, compat), which take API keys only: 401.
			p, err = s.tokenAuth(ctx, cred, rt)
		default:
			return nil, errUnauthorized
		}
	}
	if err != nil {
		return nil, err
	}
	if !p.Has(rt.scope) {
		return nil, errScope
	}
	return p, nil
}

// bearer returns the credential of `Authorization: Bearer <cred>`.
func bearer(ctx *fasthttp.RequestCtx) []byte {
	h := ctx.Request.Header.PeekBytes(hdrAuthorization)
	if len(h) <= len(bearerPrefix) || !bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return nil
	}
	return bytes.TrimSpace(h[len(bearerPrefix):])
}

// authKey resolves an API key: format check, SHA-256, then the key cache,
// which goes to the store only on a miss.
func (s *Server) authKey(key []byte) (*Principal, error) {
	if !control.ValidAPIKeyFormat(b2s(key)) {
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
