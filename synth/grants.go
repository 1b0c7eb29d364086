package synth

import (
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"voicesvc/control"
)

// Credentials a workspace makes for itself (docs/api.md#access-tokens,
// #api-keys-endpoints) and its usage (#usage): the rules of each, for
// whatever protocol asks.

// Token lifetime bounds (docs/api.md#limits).
const (
	tokenTTLDefault = 300
	tokenTTLMin     = 10
	tokenTTLMax     = 3600
	// tokenMaxVoices bounds voice_ids: each costs a lookup.
	tokenMaxVoices = 100
)

// NewToken is a minted access token: its secret (shown once), when it
// expires and its effective lifetime in seconds.
type NewToken struct {
	Secret     string
	ExpiresAt  int64
	TTLSeconds int64
}

// CreateToken mints an access token for p's workspace. ttl (seconds, nil:
// 300) is capped by the creating key's expiry, which TTLSeconds reports;
// voiceIDs (nil or empty: any voice) must each be a voice the workspace
// can use. Only the token's SHA-256 is stored. Tokens are authenticated
// (AuthToken) and spent (Admit) by the core too.
func (s *Service) CreateToken(ctx context.Context, p *control.Principal, ttl *int64, voiceIDs *[]string) (*NewToken, error) {
	secs := int64(tokenTTLDefault)
	if ttl != nil {
		secs = *ttl
		if secs < tokenTTLMin || secs > tokenTTLMax {
			return nil, control.Errorf(control.EInvalidTTL, "ttl_seconds must be between %d and %d", tokenTTLMin, tokenTTLMax)
		}
	}
	voices, err := s.tokenVoices(voiceIDs, p)
	if err != nil {
		return nil, err
	}
	now := control.NowMS()
	expires := now + secs*1000
	if p.ExpiresAt != 0 && p.ExpiresAt < expires {
		expires = p.ExpiresAt
		secs = (expires - now) / 1000
	}
	secret, hash := control.NewAccessTokenSecret()
	t := &control.AccessToken{Hash: hash, WorkspaceID: p.WorkspaceID, KeyID: p.KeyID,
		VoiceIDs: voices, ExpiresAt: expires, CreatedAt: now}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := st.CreateToken(c, t); err != nil {
		return nil, err
	}
	return &NewToken{Secret: secret, ExpiresAt: expires, TTLSeconds: secs}, nil
}

// tokenVoices checks voice_ids: each must be a voice the workspace can use
// (its own or a public one), else 400 invalid_voice_id naming it. Omitted,
// null or empty: any voice. Duplicates are kept once.
func (s *Service) tokenVoices(ids *[]string, p *control.Principal) ([]string, error) {
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
		if _, err := s.UsableVoice(p, id); err != nil {
			if control.IsCode(err, control.ENotFound) {
				return nil, control.Errorf(control.EInvalidVoiceID, "voice_ids: %q is not a voice this workspace can use", id)
			}
			return nil, err
		}
		out = append(out, id)
	}
	return out, nil
}

const (
	keyNameMax = 100
	// keyExpiresMax bounds expires_in_s at ten years: far enough to mean
	// "long-lived", near enough that epoch milliseconds never overflow.
	keyExpiresMax = 10 * 365 * 24 * 3600
	// usageDays is how many days Usage reports, today included.
	usageDays = 30
)

// KeyFields are a new key's fields as a protocol decoded them; nil is absent.
type KeyFields struct {
	Name       *string
	Scopes     *[]string
	ExpiresInS *int64
}

// ListKeys is the workspace's keys, newest first, revoked ones included.
func (s *Service) ListKeys(ctx context.Context, p *control.Principal) ([]*control.APIKey, error) {
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	return st.ListAPIKeys(c, p.WorkspaceID)
}

// CreateKey makes a key of p's workspace and returns it with its secret,
// which nothing keeps: scopes required (at least one known scope), a name
// of at most 100 characters, expires_in_s null or 60 s to ten years.
func (s *Service) CreateKey(ctx context.Context, p *control.Principal, in KeyFields) (*control.APIKey, string, error) {
	k := &control.APIKey{ID: control.NewID(), WorkspaceID: p.WorkspaceID, CreatedAt: control.NowMS()}
	if in.Name != nil {
		k.Name = strings.TrimSpace(*in.Name)
		if utf8.RuneCountInString(k.Name) > keyNameMax || !control.DisplayText(k.Name) {
			return nil, "", control.Errorf(control.EInvalidRequest,
				"name: at most %d characters, without control or bidirectional formatting characters", keyNameMax)
		}
	}
	if in.Scopes == nil || len(*in.Scopes) == 0 {
		return nil, "", control.Errorf(control.EInvalidRequest, "scopes: choose at least one of tts, voices:read, voices:write, clone")
	}
	for _, sc := range *in.Scopes {
		if !control.ValidScope(sc) {
			return nil, "", control.Errorf(control.EInvalidRequest, "scopes: unknown scope %q", sc)
		}
		if !slices.Contains(k.Scopes, sc) {
			k.Scopes = append(k.Scopes, sc)
		}
	}
	if in.ExpiresInS != nil {
		n := *in.ExpiresInS
		if n < 60 || n > keyExpiresMax {
			return nil, "", control.Errorf(control.EInvalidRequest, "expires_in_s: between 60 and %d seconds, or null for a key that never expires", keyExpiresMax)
		}
		k.ExpiresAt = k.CreatedAt + n*1000
	}
	secret, hash := control.NewAPIKeySecret()
	k.Hash = hash
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	if err := st.CreateAPIKey(c, k); err != nil {
		return nil, "", err
	}
	return k, secret, nil
}

// RevokeKey revokes a key of p's workspace; another workspace's key is not
// there at all (404). Every server stops taking it within 2 seconds (the
// change feed resets their key caches).
func (s *Service) RevokeKey(ctx context.Context, p *control.Principal, id string) (*control.APIKey, error) {
	if _, err := owned(s, p, id, Resources.GetAPIKey, func(k *control.APIKey) string { return k.WorkspaceID }); err != nil {
		return nil, err
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	return st.RevokeAPIKey(c, id, control.NowMS())
}

// Usage is a workspace's balance this UTC month and the characters of
// each of the last 30 days (today last, days without usage as 0).
type Usage struct {
	Month   string
	Balance control.Balance
	Billing string
	Daily   []control.DailyUsage
}

// Usage reads p's workspace's usage.
func (s *Service) Usage(ctx context.Context, p *control.Principal) (*Usage, error) {
	now := time.Now().UTC()
	u := &Usage{Month: control.Month(now), Billing: p.Limits.Billing, Daily: make([]control.DailyUsage, usageDays)}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	if u.Balance, err = st.Balance(c, p.WorkspaceID, u.Month, p.Limits.MonthlyChars); err != nil {
		return nil, err
	}
	first := now.AddDate(0, 0, -(usageDays - 1))
	days, err := st.DailyUsage(c, p.WorkspaceID, control.Day(first), control.Day(now))
	if err != nil {
		return nil, err
	}
	byDay := make(map[string]int64, len(days))
	for _, d := range days {
		byDay[d.Date] = d.Characters
	}
	for i := range u.Daily {
		d := control.Day(first.AddDate(0, 0, i))
		u.Daily[i] = control.DailyUsage{Date: d, Characters: byDay[d]}
	}
	return u, nil
}

// KeyRevoked reads whether the key keyID may no longer be used: revoked,
// expired or deleted (the registry of open sessions ends theirs). A store
// error counts as usable (the next change or expiry decides), so that a
// store hiccup does not close every session.
func (s *Service) KeyRevoked(keyID string) bool {
	if strings.HasPrefix(keyID, control.DashboardKeyPrefix) {
		// A token minted by a dashboard session: the session is not an API
		// key, and signing out ends the page, not its open sockets
		// (docs/api.md#dashboard-sessions).
		return false
	}
	st, c, cancel, err := s.resources()
	var k *control.APIKey
	if err == nil {
		k, err = st.GetAPIKey(c, keyID)
		cancel()
	}
	if control.IsCode(err, control.ENotFound) {
		return true
	}
	if err != nil {
		s.log.Warn("websocket key check failed", "key_id", keyID, "err", err)
		return false
	}
	return k.Check(control.NowMS()) != nil
}
