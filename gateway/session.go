package gateway

import (
	"bytes"
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

// The dashboard's cookie session (docs/api.md#dashboard-sessions). A person
// signs in with a single-use link (`voicesvc admin login-link`); the server
// answers with a cookie that holds a session secret, stored only as its
// SHA-256, valid 12 hours. On the public API the cookie acts like a legacy
// key of the workspace, with two differences that keep other sites from
// riding on it:
//
//   - a state-changing request (anything but GET and HEAD) must carry an
//     Origin equal to the service's own, else 403 origin_not_allowed. The
//     cookie is also SameSite=Strict, so browsers do not send it on
//     requests from other sites at all; the Origin check is the second lock.
//   - the compatible endpoint and the WebSocket never read it. The dashboard
//     opens its WebSocket with an access token it mints with POST /tokens.
//
// Key management (GET/POST /keys, DELETE /keys/{id}) takes the session
// only: an API key cannot make or revoke keys.

// SessionCookie is the name of the dashboard's session cookie.
const SessionCookie = web.SessionCookie

var (
	errSessionOnly = control.Errorf(control.EInsufficientScope,
		"API keys are managed in the dashboard: this endpoint takes a dashboard session only")
	errOrigin = control.Errorf(control.EOriginNotAllowed,
		"a dashboard session works only from the dashboard's own origin")
	hdrOrigin = []byte("Origin")
)

// sessionOnly authenticates a route that takes the session cookie alone. A
// key or token sent instead is refused with 403, not 401: it may be valid,
// it just cannot do this.
func (s *Server) sessionOnly(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	if len(ctx.Request.Header.PeekBytes(hdrAPIKey)) > 0 || hasAuthorization(ctx) {
		return nil, errSessionOnly
	}
	return s.sessionPrincipal(ctx)
}

// sessionPrincipal resolves the session cookie to a principal with the
// scopes of a legacy key. Missing, malformed, unknown or expired: plain 401.
func (s *Server) sessionPrincipal(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	if s.protocolAt(ctx.Path()) != nil {
		// authenticate does not offer the cookie on a dialect's routes (they
		// take bearer keys); this keeps it so for any route added later.
		return nil, errUnauthorized
	}
	sess, err := s.session(ctx)
	if err != nil {
		return nil, err
	}
	if m := ctx.Method(); !bytes.Equal(m, []byte("GET")) && !bytes.Equal(m, []byte("HEAD")) && !s.sameOrigin(ctx) {
		return nil, errOrigin
	}
	return s.core.SessionPrincipal(ctx, sess)
}

// session finds the live session of the request's cookie (the core's).
func (s *Server) session(ctx *fasthttp.RequestCtx) (*control.DashboardSession, error) {
	return s.core.Session(ctx, ctx.Request.Header.Cookie(SessionCookie))
}

// sameOrigin reports whether the request's Origin is the service's: the
// origin of the base URL, or the scheme and Host the request came to (a
// server without a base URL, or reached by another name). A browser sets
// Origin itself, so a page of another site cannot pass as this one.
func (s *Server) sameOrigin(ctx *fasthttp.RequestCtx) bool {
	origin := b2s(ctx.Request.Header.PeekBytes(hdrOrigin))
	if origin == "" || origin == "null" {
		return false
	}
	if o := baseOrigin(s.baseURL); o != "" && strings.EqualFold(origin, o) {
		return true
	}
	scheme := "http://"
	if ctx.IsTLS() || strings.HasPrefix(s.baseURL, "https://") {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+string(ctx.Host()))
}

// baseOrigin is scheme://host[:port] of a base URL; "" when it has none.
func baseOrigin(base string) string {
	u, err := url.Parse(base)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// setSessionCookie hands the browser its session: HttpOnly (no script reads
// it), SameSite=Strict (no other site sends it), Secure when the service is
// served over https, for the session's lifetime.
func (s *Server) setSessionCookie(ctx *fasthttp.RequestCtx, secret string, expires int64) {
	var c fasthttp.Cookie
	c.SetKey(SessionCookie)
	c.SetValue(secret)
	c.SetPath("/")
	c.SetHTTPOnly(true)
	c.SetSameSite(fasthttp.CookieSameSiteStrictMode)
	c.SetSecure(strings.HasPrefix(s.baseURL, "https://") || ctx.IsTLS())
	if expires > 0 {
		c.SetMaxAge(int(time.Until(time.UnixMilli(expires)).Seconds()))
	} else {
		c.SetExpire(fasthttp.CookieExpireDelete)
	}
	ctx.Response.Header.SetCookie(&c)
}
