package gateway

import (
	"slices"
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Access tokens (docs/api.md#access-tokens, #create-an-access-token): short-lived, single-use
// credentials a backend mints with its API key and hands to a browser.
//
// Lifecycle, and where each step happens:
//
//   - POST /tokens (createToken) stores only the SHA-256 of the token.
//   - authenticate (auth.go) resolves `Authorization: Bearer vst_...` through
//     the core's AuthToken (synth/credentials.go): unknown, expired or used tokens and tokens whose
//     creating key is revoked or expired are 401 token_invalid. This only
//     reads; the token stays valid.
//   - A token is consumed when its request is let through, never before:
//     the core's Admit (synth/admit.go) spends it last, after the rps
//     check, the body and voice checks, the feature check, the concurrency
//     slot and the charge. A request refused by any of those (429, 402, 403,
//     400) leaves the token valid (docs/api.md#access-tokens). ConsumeToken is one
//     conditional UPDATE in the store, so of any number of simultaneous uses
//     on any number of servers exactly one wins; the others answer 401
//     token_invalid and Admit undoes their slot and charge.
//
// Every protocol that takes a token goes through the same core: AuthToken,
// then Admit; none consumes a token itself.

// Token lifetime bounds (docs/api.md#limits).
const (
	tokenTTLDefault = 300
	tokenTTLMin     = 10
	tokenTTLMax     = 3600
	// tokenMaxVoices bounds voice_ids: each costs a lookup.
	tokenMaxVoices = 100
)

var hdrNoStore = []byte("no-store")

// tokenRoutes registers POST /tokens (called from routes); tokens are
// authenticated and spent by the core (AuthToken, Admit).
func (s *Server) tokenRoutes(api *router.Group) {
	s.api(api, "POST", "/tokens", control.ScopeTTS, keysOnly, s.createToken)
}

// tokenBody is the body of POST /tokens; both fields are optional.
type tokenBody struct {
	TTLSeconds *int64    `json:"ttl_seconds"`
	VoiceIDs   *[]string `json:"voice_ids"`
}

var tokenFieldCodes = fieldCodes{"ttl_seconds": control.EInvalidTTL, "voice_ids": control.EInvalidVoiceID}

// tokenData is the payload of a created token.
type tokenData struct {
	token     string
	expiresAt int64
	ttl       int64
}

func (d *tokenData) appendJSON(b []byte) []byte {
	b = append(b, `{"token":`...)
	b = appendString(b, d.token)
	b = append(b, `,"expires_at":`...)
	b = strconv.AppendInt(b, d.expiresAt, 10)
	b = append(b, `,"ttl_seconds":`...)
	b = strconv.AppendInt(b, d.ttl, 10)
	return append(b, '}')
}

// POST /tokens: mint an access token for the caller's workspace. Only API
// keys and dashboard sessions reach this handler (authenticate refuses
// tokens on this route).
func (s *Server) createToken(ctx *fasthttp.RequestCtx, p *control.Principal) {
	t, d, err := s.newToken(ctx.Request.Body(), p)
	if err == nil {
		c, cancel := storeCtx()
		err = s.store.CreateToken(c, t)
		cancel()
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, hdrNoStore)
	s.writeData(ctx, fasthttp.StatusCreated, d)
}

// newToken validates the body and builds the token row and the response.
// The lifetime is capped by the creating key's expiry: ttl_seconds reports
// the effective lifetime.
func (s *Server) newToken(body []byte, p *control.Principal) (*control.AccessToken, *tokenData, error) {
	var in tokenBody
	if err := decodeBody(body, s.cfg.MaxJSONBody, &in, tokenFieldCodes); err != nil {
		return nil, nil, err
	}
	ttl := int64(tokenTTLDefault)
	if in.TTLSeconds != nil {
		ttl = *in.TTLSeconds
		if ttl < tokenTTLMin || ttl > tokenTTLMax {
			return nil, nil, control.Errorf(control.EInvalidTTL,
				"ttl_seconds must be between %d and %d", tokenTTLMin, tokenTTLMax)
		}
	}
	voices, err := s.tokenVoices(in.VoiceIDs, p)
	if err != nil {
		return nil, nil, err
	}
	now := control.NowMS()
	expires := now + ttl*1000
	if p.ExpiresAt != 0 && p.ExpiresAt < expires {
		expires = p.ExpiresAt
		ttl = (expires - now) / 1000
	}
	secret, hash := control.NewAccessTokenSecret()
	t := &control.AccessToken{Hash: hash, WorkspaceID: p.WorkspaceID, KeyID: p.KeyID,
		VoiceIDs: voices, ExpiresAt: expires, CreatedAt: now}
	return t, &tokenData{token: secret, expiresAt: expires, ttl: ttl}, nil
}

// tokenVoices checks voice_ids: each must be a voice the workspace can use
// (its own or a public one), else 400 invalid_voice_id naming it. Omitted,
// null or empty: any voice. Duplicates are kept once.
func (s *Server) tokenVoices(ids *[]string, p *control.Principal) ([]string, error) {
	if ids == nil || len(*ids) == 0 {
		return nil, nil
	}
	if len(*ids) > tokenMaxVoices {
		return nil, control.Errorf(control.EInvalidVoiceID, "voice_ids: at most %d voices", tokenMaxVoices)
	}
	out := make([]string, 0, len(*ids))
	for _, id := range *ids {
		if slices.Contains(out, id) {
			continue
		}
		if _, err := s.core.UsableVoice(p, id); err != nil {
			if control.IsCode(err, control.ENotFound) {
				return nil, control.Errorf(control.EInvalidVoiceID, "voice_ids: %q is not a voice this workspace can use", id)
			}
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}
