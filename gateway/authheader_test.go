package gateway

import (
	"testing"

	"voicesvc/control"
)

// Any Authorization header turns the dashboard's cookie off
// (docs/api.md#dashboard-sessions), whatever its scheme: a request with
// the cookie and `Authorization: Basic ...` (or a bare `Bearer`) is not the
// session's.
func TestSessionCookieOffWithAnyAuthorization(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := ts.signIn(ts.ws.ID)
	ts.do("GET", "/voices", "", nil, "Cookie", cookie).data(t, 200)
	for _, auth := range []string{"Basic dXNlcjpwYXNz", "Bearer", "Token abc", "Digest x"} {
		ts.do("GET", "/voices", "", nil, "Cookie", cookie, "Authorization", auth).failure(t, 401, "")
		ts.do("GET", "/usage", "", nil, "Cookie", cookie, "Authorization", auth).failure(t, 401, "")
		ts.do("GET", "/keys", "", nil, "Cookie", cookie, "Authorization", auth).failure(t, 403, control.EInsufficientScope)
	}
}
