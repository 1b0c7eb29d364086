package gateway

import (
	"crypto/sha256"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/dashboard"
	"voicesvc/web"
)

// The dashboard's pages (docs/api.md#dashboard): server-rendered frames
// from package dashboard, whose scripts call the public API with the
// session cookie (session.go). Signing in: GET /dashboard/login?token=...
// shows a button that POSTs the link's secret back, so that a link
// previewer fetching the URL does not use up the single-use link.

var (
	valCSP            = []byte(dashboard.CSP)
	hdrNoSniff        = []byte("X-Content-Type-Options")
	valNoSniff        = []byte("nosniff")
	hdrReferrerPolicy = []byte("Referrer-Policy")
	// same-origin, not no-referrer: with no-referrer Chromium sends
	// `Origin: null` on form posts, which the origin check must refuse.
	// Other sites never see a referrer, so a sign-in link's token never
	// leaves the service.
	valNoReferrer   = []byte("same-origin")
	hdrFrameOptions = []byte("X-Frame-Options")
	valDeny         = []byte("DENY")
	valStaticCache  = []byte("public, max-age=300")
)

func (s *Server) dashboardRoutes(r *router.Router) {
	page := s.newRoute("GET /dashboard/{page}", "", false)
	// This router cannot hold both /dashboard and /dashboard/: GET
	// /dashboard (no slash) is redirected on its way to the 404.
	unmatched, dash := r.NotFound, s.plain(page, func(ctx *fasthttp.RequestCtx) {
		ctx.Redirect("/dashboard/", fasthttp.StatusFound)
	})
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		if ctx.IsGet() && string(ctx.Path()) == "/dashboard" {
			dash(ctx)
			return
		}
		unmatched(ctx)
	}
	for _, p := range dashboard.Pages {
		name, title, script := p.Name, p.Title, p.Script
		r.GET(p.Path, s.plain(page, func(ctx *fasthttp.RequestCtx) { s.dashboardPage(ctx, name, title, script) }))
	}
	r.GET("/dashboard/login", s.plain(s.newRoute("GET /dashboard/login", "", false), s.loginPage))
	r.POST("/dashboard/login", s.plain(s.newRoute("POST /dashboard/login", "", false), s.login))
	r.POST("/dashboard/logout", s.plain(s.newRoute("POST /dashboard/logout", "", false), s.logout))
	r.GET("/dashboard/static/{file}", s.plain(s.newRoute("GET /dashboard/static/{file}", "", false), s.dashboardStatic))
}

// secureHeaders are on every dashboard response.
func secureHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetCanonical(hdrCSP, valCSP)
	h.SetCanonical(hdrNoSniff, valNoSniff)
	h.SetCanonical(hdrReferrerPolicy, valNoReferrer)
	h.SetCanonical(hdrFrameOptions, valDeny)
}

func (s *Server) render(ctx *fasthttp.RequestCtx, status int, p *dashboard.Page) {
	secureHeaders(ctx)
	p.APIRoot = APIRoot
	b, err := dashboard.Render(p)
	if err != nil {
		s.log.Error("dashboard page", "page", p.Name, "err", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetBodyString("internal error")
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, hdrNoStore)
	ctx.SetContentTypeBytes(contentTypeHTML)
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}

// dashboardPage renders a signed-in page; without a live session it sends
// the browser to the sign-in page.
func (s *Server) dashboardPage(ctx *fasthttp.RequestCtx, name, title, script string) {
	sess, err := s.session(ctx)
	var ws *control.Workspace
	if err == nil {
		c, cancel := storeCtx()
		ws, err = s.store.GetWorkspace(c, sess.WorkspaceID)
		cancel()
	}
	if err != nil {
		if control.IsCode(err, control.EUnauthorized) || control.IsCode(err, control.ENotFound) {
			secureHeaders(ctx)
			ctx.Redirect("/dashboard/login", fasthttp.StatusSeeOther)
			return
		}
		s.render(ctx, fasthttp.StatusServiceUnavailable, &dashboard.Page{Name: "login", Title: "Dashboard unavailable",
			Problem: "The service cannot reach its database right now. Reload this page in a moment."})
		return
	}
	l := ws.Limits(s.billing)
	s.render(ctx, fasthttp.StatusOK, &dashboard.Page{Name: name, Title: title, Script: script,
		Workspace: &dashboard.Workspace{ID: ws.ID, Name: ws.Name, Plan: ws.Plan, Billing: l.Billing,
			Concurrency: l.Concurrency, RPS: l.RPS, Sessions: l.Sessions, MonthlyChars: l.MonthlyChars,
			Streaming:        l.Streaming,
			SessionExpiresAt: time.UnixMilli(sess.ExpiresAt).UTC().Format("2006-01-02 15:04 UTC")}})
}

// GET /dashboard/login: the sign-in button for a link, or how to get one.
func (s *Server) loginPage(ctx *fasthttp.RequestCtx) {
	token := string(ctx.QueryArgs().Peek("token"))
	p := &dashboard.Page{Name: "login", Title: "Sign in"}
	if token != "" && !control.ValidLoginLinkFormat(token) {
		p.Problem = "This sign-in link is not complete. Copy the whole link and try again."
	} else {
		p.Token = token
	}
	s.render(ctx, fasthttp.StatusOK, p)
}

// POST /dashboard/login: redeem the link, set the cookie, go to the overview.
func (s *Server) login(ctx *fasthttp.RequestCtx) {
	if !s.sameOrigin(ctx) {
		s.render(ctx, fasthttp.StatusForbidden, &dashboard.Page{Name: "login", Title: "Sign in",
			Problem: "Signing in works only from this service's own sign-in page."})
		return
	}
	token := ctx.PostArgs().Peek("token")
	if !control.ValidLoginLinkFormat(b2s(token)) {
		s.render(ctx, fasthttp.StatusUnauthorized, &dashboard.Page{Name: "login", Title: "Sign in",
			Problem: "This sign-in link is not valid. Ask for a new one."})
		return
	}
	sum := sha256.Sum256(token)
	secret, hash := control.NewDashboardSessionSecret()
	sess := &control.DashboardSession{Hash: hash}
	c, cancel := storeCtx()
	err := s.store.RedeemLoginLink(c, sum[:], control.NowMS(), sess)
	cancel()
	if err != nil {
		status, problem := fasthttp.StatusUnauthorized, "This sign-in link has been used or has expired. Ask for a new one: each link works once."
		if !control.IsCode(err, control.EUnauthorized) {
			s.log.Warn("dashboard sign-in", "request_id", string(web.RequestID(ctx)), "err", err)
			status, problem = fasthttp.StatusServiceUnavailable, "Signing in failed because the service cannot reach its database. Try the same link again in a moment."
		}
		s.render(ctx, status, &dashboard.Page{Name: "login", Title: "Sign in", Problem: problem})
		return
	}
	secureHeaders(ctx)
	s.setSessionCookie(ctx, secret, sess.ExpiresAt)
	ctx.Redirect("/dashboard/", fasthttp.StatusSeeOther)
}

// POST /dashboard/logout: end the session and forget the cookie.
func (s *Server) logout(ctx *fasthttp.RequestCtx) {
	if !s.sameOrigin(ctx) {
		s.render(ctx, fasthttp.StatusForbidden, &dashboard.Page{Name: "login", Title: "Sign out",
			Problem: "Signing out works only from the dashboard itself."})
		return
	}
	if cookie := ctx.Request.Header.Cookie(SessionCookie); control.ValidDashboardSessionFormat(b2s(cookie)) {
		sum := sha256.Sum256(cookie)
		c, cancel := storeCtx()
		err := s.store.DeleteDashboardSession(c, sum[:])
		cancel()
		if err != nil {
			s.render(ctx, fasthttp.StatusServiceUnavailable, &dashboard.Page{Name: "login", Title: "Sign out",
				Problem: "Signing out failed because the service cannot reach its database. Try again in a moment."})
			return
		}
	}
	secureHeaders(ctx)
	s.setSessionCookie(ctx, "", 0)
	ctx.Redirect("/dashboard/login", fasthttp.StatusSeeOther)
}

// GET /dashboard/static/{file}: the embedded scripts and styles.
func (s *Server) dashboardStatic(ctx *fasthttp.RequestCtx) {
	name, _ := ctx.UserValue("file").(string)
	b, ct, ok := dashboard.Static(name)
	secureHeaders(ctx)
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("not found")
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valStaticCache)
	ctx.SetContentType(ct)
	ctx.SetBody(b)
}
