package control

import "strings"

// Principal is who a request acts for: a workspace, through one of its API
// keys, an access token that key created, or the dashboard's session.
// Every protocol authenticates into one; the application core (package
// synth) decides what it may do. It never holds the secret.
type Principal struct {
	WorkspaceID string
	KeyID       string // the key used, or the key that created Token
	Scopes      Scopes
	ExpiresAt   int64 // of the key; 0 = never
	Legacy      bool
	Plan        string
	// Limits are the workspace's effective plan limits and billing mode
	// (overrides and the server's default applied) as of the last change.
	Limits Limits
	// Token is set when the request authenticated with an access token
	// (`Authorization: Bearer vst_...`): its grant is tts only and
	// Token.VoiceIDs, when not empty, restricts the voices it may use.
	Token *AccessToken
	// Session is set when the request authenticated with the dashboard's
	// session cookie; KeyID is then "dashboard:" + its id.
	Session bool
}

// DashboardKeyPrefix marks the KeyID of a dashboard session's principal,
// and of the access tokens a session mints.
const DashboardKeyPrefix = "dashboard:"

// FromDashboard reports whether p acts through the dashboard: its session
// cookie, or an access token the session minted. Such a principal has no API
// key behind it (KeyID is "dashboard:" + the session id), so code that
// watches the creating key for revocation must not look one up for it.
func (p *Principal) FromDashboard() bool { return strings.HasPrefix(p.KeyID, DashboardKeyPrefix) }

// ScopeAnyKey is a route requirement met by any credential of the
// workspace (the dashboard's session-only routes and usage).
const ScopeAnyKey = "*"

// Scopes is a set of scopes as a bit mask, so that a scope check on the hot
// path is one AND and a Principal carries no slice.
type Scopes uint8

// The scope bits, in the order of the scope names.
const (
	ScopeBitVoicesRead Scopes = 1 << iota
	ScopeBitVoicesWrite
	ScopeBitClone
	ScopeBitTTS
)

// scopeBit maps a scope name to its bit; unknown names are 0 (no grant).
func scopeBit(name string) Scopes {
	switch name {
	case ScopeVoicesRead:
		return ScopeBitVoicesRead
	case ScopeVoicesWrite:
		return ScopeBitVoicesWrite
	case ScopeClone:
		return ScopeBitClone
	case ScopeTTS:
		return ScopeBitTTS
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

// Has reports whether the set grants scope (a Scope* name).
func (s Scopes) Has(scope string) bool {
	b := scopeBit(scope)
	return b != 0 && s&b == b
}

// Has reports whether the principal may use scope. Legacy keys have all
// four scopes (docs/api.md#api-keys); tokens grant tts only
// (docs/api.md#access-tokens).
func (p *Principal) Has(scope string) bool {
	if p.Token != nil {
		return scope == ScopeTTS
	}
	if scope == ScopeAnyKey {
		return true
	}
	return p.Legacy || p.Scopes.Has(scope)
}
