package gateway

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/synth"
)

var (
	hdrAPIKey        = []byte("X-API-Key")
	hdrAuthorization = []byte("Authorization")
	bearerPrefix     = []byte("Bearer ")
	errUnauthorized  = control.Errorf(control.EUnauthorized, "missing or invalid API key")
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
func (s *Server) authenticate(ctx *fasthttp.RequestCtx, rt *route) (*control.Principal, error) {
	if rt.scope == "" {
		return &control.Principal{}, nil
	}
	var p *control.Principal
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
		case bytes.HasPrefix(cred, []byte(control.AccessTokenPrefix)) &&
			(rt.tokens || rt.scope != control.ScopeTTS):
			// Tokens work on speak and stream (rt.tokens). Elsewhere a valid
			// token fails the scope check below (403 insufficient_scope:
			// listing, creating, cloning), except on the other tts routes
			// (POST /tokens, compat), which take API keys only: 401.
			p, err = s.core.AuthToken(cred)
		default:
			return nil, errUnauthorized
		}
	}
	if err != nil {
		return nil, err
	}
	if !p.Has(rt.scope) {
		return nil, synth.ScopeError(rt.scope)
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

// authKey resolves an API key (the core's credentials).
func (s *Server) authKey(key []byte) (*control.Principal, error) { return s.core.AuthKey(key) }
