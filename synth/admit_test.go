package synth

import (
	"context"
	"testing"

	"voicesvc/control"
)

// TestAdmitSession: a session admitted past its handshake passes the
// route's scope, the request rate and the session's admission, in that
// order (docs/dialects.md#elevenlabs, "Credentials in the first
// message"); a refusal at any step holds nothing, bills nothing and
// leaves the token valid.
func TestAdmitSession(t *testing.T) {
	withScopes := func(names ...string) func(*control.Principal) {
		return func(p *control.Principal) { p.Scopes = control.ScopesOf(names) }
	}
	for _, tc := range []struct {
		name     string
		p        *control.Principal
		spent    bool  // the second's one request already made
		balance  int64 // characters left
		want     string
		consumed bool
	}{
		{"admitted", principal(withScopes(control.ScopeTTS)), false, 1000, "", false},
		{"a token, spent by its admission", principal(withToken()), false, 1000, "", true},
		{"scope", principal(withScopes(control.ScopeVoicesRead), func(p *control.Principal) { p.Limits.RPS = 1 }),
			true, 1000, control.EInsufficientScope, false},
		{"rate", principal(withToken(), func(p *control.Principal) { p.Limits.RPS = 1 }), true, 1000, control.ERateLimited, false},
		{"no session slot", principal(withToken(), func(p *control.Principal) { p.Limits.Sessions = -1 }), false, 1000,
			control.ETooManySessions, false},
		{"no balance", principal(withToken()), false, 0, control.EInsufficientCredits, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, "", tc.balance)
			if tc.spent {
				c.svc.AllowRequest(context.Background(), tc.p)
			}
			a, err := c.svc.AdmitSession(context.Background(), tc.p, control.ScopeTTS)
			if control.ErrorCode(err) != tc.want && !(tc.want == "" && err == nil) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if err == nil {
				if n := c.lim.InUse(wsOwn, control.SlotSession); n != 1 {
					t.Errorf("session slots held: %d, want 1", n)
				}
				a.Done(0)
			}
			c.check(t, after{consumed: tc.consumed})
		})
	}
}
