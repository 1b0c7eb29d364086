package gateway

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/dashboard"
)

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// loginLink stores a login link for ws and returns its secret.
func (ts *testServer) loginLink(ws string, ttl time.Duration) string {
	ts.t.Helper()
	secret, hash := control.NewLoginLinkSecret()
	if err := ts.store.CreateLoginLink(context.Background(), &control.LoginLink{Hash: hash, WorkspaceID: ws,
		ExpiresAt: time.Now().Add(ttl).UnixMilli()}); err != nil {
		ts.t.Fatal(err)
	}
	return secret
}

// post sends a form to a dashboard path with an Origin ("" sends none).
func (ts *testServer) post(path, origin, cookie string, form url.Values) *http.Response {
	ts.t.Helper()
	req, _ := http.NewRequest("POST", ts.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		ts.t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// signIn redeems a new login link for ws and returns the Cookie header value.
func (ts *testServer) signIn(ws string) string {
	ts.t.Helper()
	resp := ts.post("/dashboard/login", ts.base, "", url.Values{"token": {ts.loginLink(ws, time.Minute)}})
	if resp.StatusCode != 303 || resp.Header.Get("Location") != ts.base+"/dashboard/" && resp.Header.Get("Location") != "/dashboard/" {
		ts.t.Fatalf("sign-in: %d %v", resp.StatusCode, resp.Header)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			return c.Name + "=" + c.Value
		}
	}
	ts.t.Fatal("no session cookie")
	return ""
}

func TestDashboardSignIn(t *testing.T) {
	ts := newTestServer(t, "")
	link := ts.loginLink(ts.ws.ID, time.Minute)

	if r := ts.post("/dashboard/login", "http://evil.example", "", url.Values{"token": {link}}); r.StatusCode != 403 {
		t.Fatalf("other origin: %d", r.StatusCode)
	}
	if r := ts.post("/dashboard/login", "", "", url.Values{"token": {link}}); r.StatusCode != 403 {
		t.Fatalf("no origin: %d", r.StatusCode)
	}
	resp := ts.post("/dashboard/login", ts.base, "", url.Values{"token": {link}})
	if resp.StatusCode != 303 {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
	set := resp.Header.Get("Set-Cookie")
	for _, want := range []string{SessionCookie + "=vss_", "HttpOnly", "SameSite=Strict", "path=/", "max-age=4319"} {
		if !strings.Contains(set, want) {
			t.Errorf("Set-Cookie %q lacks %q", set, want)
		}
	}
	if strings.Contains(set, "Secure") {
		t.Errorf("Secure cookie on plain http: %q", set)
	}
	// Single use; a malformed token is refused without a lookup.
	if r := ts.post("/dashboard/login", ts.base, "", url.Values{"token": {link}}); r.StatusCode != 401 {
		t.Fatalf("second use: %d", r.StatusCode)
	}
	if r := ts.post("/dashboard/login", ts.base, "", url.Values{"token": {"vsl_short"}}); r.StatusCode != 401 {
		t.Fatalf("malformed: %d", r.StatusCode)
	}
	// Only the hash is stored.
	cookie := resp.Cookies()[0].Value
	sum := sha256.Sum256([]byte(cookie))
	if _, err := ts.store.GetDashboardSession(context.Background(), sum[:], control.NowMS()); err != nil {
		t.Fatalf("session by hash: %v", err)
	}
}

func TestDashboardPages(t *testing.T) {
	ts := newTestServer(t, "")
	get := func(path, cookie string) *http.Response {
		req, _ := http.NewRequest("GET", ts.base+path, nil)
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	cookie := ts.signIn(ts.ws.ID)
	tests := []struct {
		path, cookie string
		status       int
		location, ct string
	}{
		{"/dashboard", "", 302, "/dashboard/", ""},
		{"/dashboard/", "", 303, "/dashboard/login", ""},
		{"/dashboard/keys", SessionCookie + "=vss_" + strings.Repeat("a", 40), 303, "/dashboard/login", ""},
		{"/dashboard/", cookie, 200, "", "text/html"},
		{"/dashboard/voices", cookie, 200, "", "text/html"},
		{"/dashboard/playground", cookie, 200, "", "text/html"},
		{"/dashboard/keys", cookie, 200, "", "text/html"},
		{"/dashboard/login", "", 200, "", "text/html"},
		{"/dashboard/login?token=vsl_x", "", 200, "", "text/html"},
		{"/dashboard/static/app.js", "", 200, "", "text/javascript"},
		{"/dashboard/static/pcm-worklet.js", "", 200, "", "text/javascript"},
		{"/dashboard/static/nope.js", "", 404, "", ""},
	}
	for _, tt := range tests {
		r := get(tt.path, tt.cookie)
		if r.StatusCode != tt.status || !strings.HasSuffix(r.Header.Get("Location"), tt.location) ||
			!strings.HasPrefix(r.Header.Get("Content-Type"), tt.ct) {
			t.Errorf("GET %s: %d %q %q", tt.path, r.StatusCode, r.Header.Get("Location"), r.Header.Get("Content-Type"))
		}
		if strings.HasPrefix(tt.path, "/dashboard/") && r.Header.Get("Content-Security-Policy") != dashboard.CSP {
			t.Errorf("GET %s: CSP %q", tt.path, r.Header.Get("Content-Security-Policy"))
		}
	}
}

// TestSessionOnAPI: the cookie acts as a legacy key of its workspace, from
// the service's own origin only for changes, never on compat.
func TestSessionOnAPI(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := ts.signIn(ts.ws.ID)
	voice := map[string]any{"name": "From the dashboard", "consent": true}
	ts.do("GET", "/voices", "", nil, "Cookie", cookie).data(t, 200)
	ts.do("POST", "/voices", "", voice, "Cookie", cookie).failure(t, 403, control.EOriginNotAllowed)
	ts.do("POST", "/voices", "", voice, "Cookie", cookie, "Origin", "http://evil.example").failure(t, 403, control.EOriginNotAllowed)
	ts.do("POST", "/voices", "", voice, "Cookie", cookie, "Origin", "null").failure(t, 403, control.EOriginNotAllowed)
	v := ts.do("POST", "/voices", "", voice, "Cookie", cookie, "Origin", ts.base).data(t, 201)["voice"].(map[string]any)
	if v["org_id"] != ts.ws.ID {
		t.Fatalf("voice of %v", v["org_id"])
	}
	// A key wins over the cookie: another workspace's key acts for its own.
	other := ts.workspace("pro")
	okey := ts.newKey(other.ID, nil, 0, false)
	if d := ts.do("GET", "/voices/"+v["id"].(string), okey, nil, "Cookie", cookie); d.status != 404 {
		t.Fatalf("key and cookie: %d", d.status)
	}
	// Compat never reads the cookie.
	r := ts.do("POST", "/compat/audio/speech", "", map[string]any{"model": "tts-1", "input": "hi", "voice": "x"},
		"Cookie", cookie, "Origin", ts.base)
	if r.status != 401 {
		t.Fatalf("compat with the cookie: %d %s", r.status, r.body)
	}
	// POST /tokens mints a token for the workspace, capped by the session.
	tok := ts.do("POST", "/tokens", "", map[string]any{"ttl_seconds": 60}, "Cookie", cookie, "Origin", ts.base).data(t, 201)
	p, err := ts.srv.core.AuthToken([]byte(tok["token"].(string)))
	if err != nil || p.WorkspaceID != ts.ws.ID || !p.FromDashboard() || p.Token == nil || p.ExpiresAt != 0 {
		t.Fatalf("token principal %+v %v", p, err)
	}
	// Signing out ends the session.
	if r := ts.post("/dashboard/logout", "http://evil.example", cookie, nil); r.StatusCode != 403 {
		t.Fatalf("sign-out from elsewhere: %d", r.StatusCode)
	}
	resp := ts.post("/dashboard/logout", ts.base, cookie, nil)
	if resp.StatusCode != 303 || !strings.Contains(resp.Header.Get("Set-Cookie"), SessionCookie+"=;") {
		t.Fatalf("sign-out: %d %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
	ts.do("GET", "/voices", "", nil, "Cookie", cookie).failure(t, 401, "")
}

func TestSessionExpires(t *testing.T) {
	ts := newTestServer(t, "")
	secret, hash := control.NewDashboardSessionSecret()
	link := ts.loginLink(ts.ws.ID, time.Minute)
	lh := sha256.Sum256([]byte(link))
	now := control.NowMS()
	if err := ts.store.RedeemLoginLink(context.Background(), lh[:], now,
		&control.DashboardSession{Hash: hash, ExpiresAt: now + 50}); err != nil {
		t.Fatal(err)
	}
	cookie := SessionCookie + "=" + secret
	time.Sleep(60 * time.Millisecond)
	ts.do("GET", "/usage", "", nil, "Cookie", cookie).failure(t, 401, "")
}

func TestKeysEndpoints(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := ts.signIn(ts.ws.ID)
	with := []string{"Cookie", cookie, "Origin", ts.base}

	// Session only: a key, even with all scopes, cannot manage keys.
	ts.do("GET", "/keys", ts.key, nil).failure(t, 403, control.EInsufficientScope)
	ts.do("POST", "/keys", ts.key, map[string]any{"scopes": []string{"tts"}}).failure(t, 403, control.EInsufficientScope)
	ts.do("GET", "/keys", "", nil).failure(t, 401, "")
	ts.do("POST", "/keys", "", map[string]any{"scopes": []string{"tts"}}, "Cookie", cookie).failure(t, 403, control.EOriginNotAllowed)

	for _, bad := range []map[string]any{
		{},
		{"scopes": []string{}},
		{"scopes": []string{"admin"}},
		{"scopes": "tts"},
		{"scopes": []string{"tts"}, "expires_in_s": 5},
		{"scopes": []string{"tts"}, "name": strings.Repeat("n", 101)},
	} {
		ts.do("POST", "/keys", "", bad, with...).failure(t, 400, control.EInvalidRequest)
	}
	r := ts.do("POST", "/keys", "", map[string]any{"name": "ci", "scopes": []string{"voices:read", "tts", "tts"}, "expires_in_s": 3600}, with...)
	k := r.data(t, 201)
	if r.header.Get("Cache-Control") != "no-store" || !control.ValidAPIKeyFormat(k["key"].(string)) || k["name"] != "ci" ||
		len(k["scopes"].([]any)) != 2 || k["expires_at"] == nil || k["revoked_at"] != nil {
		t.Fatalf("created %v", k)
	}
	secret, id := k["key"].(string), k["id"].(string)
	ts.do("GET", "/voices", secret, nil).data(t, 200)
	ts.do("POST", "/voices", secret, map[string]any{"name": "x", "consent": true}).failure(t, 403, control.EInsufficientScope)

	list := ts.do("GET", "/keys", "", nil, "Cookie", cookie).data(t, 200)["keys"].([]any)
	if len(list) != 2 || list[0].(map[string]any)["id"] != id || list[0].(map[string]any)["key"] != nil {
		t.Fatalf("keys %v", list)
	}

	// Another workspace's key is not there at all.
	other := ts.workspace("pro")
	ts.newKey(other.ID, nil, 0, false)
	otherID := func() string {
		keys, _ := ts.store.ListAPIKeys(context.Background(), other.ID)
		return keys[0].ID
	}()
	ts.do("DELETE", "/keys/"+otherID, "", nil, with...).failure(t, 404, control.ENotFound)
	ts.do("DELETE", "/keys/nope", "", nil, with...).failure(t, 404, control.ENotFound)

	rk := ts.do("DELETE", "/keys/"+id, "", nil, with...).data(t, 200)
	if rk["revoked_at"] == nil {
		t.Fatalf("revoked %v", rk)
	}
	if _, ok := waitFor(3*time.Second, func() bool { return ts.do("GET", "/voices", secret, nil).status == 401 }); !ok {
		t.Fatal("revoked key still works after 3 s")
	}
}

func TestUsageEndpoint(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := ts.signIn(ts.ws.ID)
	ttsOnly := ts.newKey(ts.ws.ID, []string{"tts"}, 0, false)
	if _, _, err := ts.store.Charge(context.Background(), ts.ws.ID, control.Month(time.Now()), 1_000_000, 42, true); err != nil {
		t.Fatal(err)
	}
	for _, cred := range [][]string{{"X-API-Key", ttsOnly}, {"Cookie", cookie}} {
		r := ts.do("GET", "/usage", "", nil, cred...)
		d := r.data(t, 200)
		daily := d["daily"].([]any)
		last := daily[len(daily)-1].(map[string]any)
		if d["month"] != control.Month(time.Now()) || d["used"] != float64(42) || d["allowance"] != float64(1_000_000) ||
			d["remaining"] != float64(1_000_000-42) || len(daily) != 30 ||
			last["date"] != control.Day(time.Now()) || last["characters"] != float64(42) {
			t.Fatalf("usage %s", r.body)
		}
	}
	tok := ts.do("POST", "/tokens", ts.key, nil).data(t, 201)["token"].(string)
	ts.do("GET", "/usage", "", nil, "Authorization", "Bearer "+tok).failure(t, 403, control.EInsufficientScope)
	ts.do("GET", "/usage", "", nil).failure(t, 401, "")
}

// TestSessionNeverOnCompat: even a compat route that took the cookie by
// mistake would find sessionPrincipal refusing it.
func TestSessionNeverOnCompat(t *testing.T) {
	ts := newTestServer(t, "")
	cookie := strings.TrimPrefix(ts.signIn(ts.ws.ID), SessionCookie+"=")
	for _, tt := range []struct {
		path string
		ok   bool
	}{{APIRoot + "/voices", true}, {APIRoot + "/compat/models", false}, {APIRoot + "/compat/audio/speech", false}} {
		var ctx fasthttp.RequestCtx
		ctx.Request.SetRequestURI(tt.path)
		ctx.Request.Header.SetCookie(SessionCookie, cookie)
		p, err := ts.srv.sessionPrincipal(&ctx)
		if (err == nil) != tt.ok || tt.ok && (p.WorkspaceID != ts.ws.ID || !p.Session || !p.Legacy) {
			t.Errorf("%s: %+v %v", tt.path, p, err)
		}
	}
}
