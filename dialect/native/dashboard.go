package native

import (
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/dashboard"
	"voicesvc/synth"
	"voicesvc/web"
)

// The dashboard's pages (docs/api.md#dashboard): server-rendered frames
// from package dashboard, whose scripts call the public API with the
// session cookie (the host authenticates it). Signing in: GET
// /dashboard/login?token=... shows a button that POSTs the link's secret
// back, so that a link previewer fetching the URL does not use up the
// single-use link. The host answers GET /dashboard with a redirect to
// /dashboard/ (its router cannot hold both).

var (
	hdrCSP            = []byte("Content-Security-Policy")
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
	contentTypeHTML = []byte("text/html; charset=utf-8")
)

func (n *Protocol) registerDashboard(h web.Host) {
	for _, p := range dashboard.Pages {
		name, title, script := p.Name, p.Title, p.Script
		h.Handle(web.Route{Method: "GET", Path: p.Path, Root: true, Name: "GET /dashboard/{page}"},
			func(ctx *fasthttp.RequestCtx, _ *control.Principal) { n.dashboardPage(ctx, name, title, script) })
	}
	h.Handle(web.Route{Method: "GET", Path: "/dashboard/login", Root: true}, n.loginPage)
	h.Handle(web.Route{Method: "POST", Path: "/dashboard/login", Root: true}, n.login)
	h.Handle(web.Route{Method: "POST", Path: "/dashboard/logout", Root: true}, n.logout)
	h.Handle(web.Route{Method: "GET", Path: "/dashboard/static/{file}", Root: true}, n.dashboardStatic)
}

// pageHeaders are on every dashboard and documentation response: the
// policy csp, no sniffing, no framing, no referrer to other sites.
func pageHeaders(ctx *fasthttp.RequestCtx, csp []byte) {
	h := &ctx.Response.Header
	h.SetCanonical(hdrCSP, csp)
	h.SetCanonical(hdrNoSniff, valNoSniff)
	h.SetCanonical(hdrReferrerPolicy, valNoReferrer)
	h.SetCanonical(hdrFrameOptions, valDeny)
}

func (n *Protocol) render(ctx *fasthttp.RequestCtx, status int, p *dashboard.Page) {
	pageHeaders(ctx, valCSP)
	p.APIRoot = web.APIRoot
	b, err := dashboard.Render(p)
	if err != nil {
		n.h.Logger().Error("dashboard page", "page", p.Name, "err", err)
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetBodyString("internal error")
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	ctx.SetContentTypeBytes(contentTypeHTML)
	ctx.SetStatusCode(status)
	ctx.SetBody(b)
}

// dashboardPage renders a signed-in page; without a live session it sends
// the browser to the sign-in page.
func (n *Protocol) dashboardPage(ctx *fasthttp.RequestCtx, name, title, script string) {
	sess, err := n.h.Session(ctx)
	var ws *control.Workspace
	var l control.Limits
	if err == nil {
		ws, l, err = n.h.Core().SessionWorkspace(ctx, sess)
	}
	if err != nil {
		if control.IsCode(err, control.EUnauthorized) || control.IsCode(err, control.ENotFound) {
			pageHeaders(ctx, valCSP)
			ctx.Redirect("/dashboard/login", fasthttp.StatusSeeOther)
			return
		}
		n.render(ctx, fasthttp.StatusServiceUnavailable, &dashboard.Page{Name: "login", Title: "Dashboard unavailable",
			Problem: "The service cannot reach its database right now. Reload this page in a moment."})
		return
	}
	n.render(ctx, fasthttp.StatusOK, &dashboard.Page{Name: name, Title: title, Script: script,
		Workspace: &dashboard.Workspace{ID: ws.ID, Name: ws.Name, Plan: ws.Plan, Billing: l.Billing,
			Concurrency: l.Concurrency, RPS: l.RPS, Sessions: l.Sessions, MonthlyChars: l.MonthlyChars,
			Streaming:        l.Streaming,
			SessionExpiresAt: time.UnixMilli(sess.ExpiresAt).UTC().Format("2006-01-02 15:04 UTC")}})
}

// GET /dashboard/login: the sign-in button for a link, or how to get one.
func (n *Protocol) loginPage(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	token := string(ctx.QueryArgs().Peek("token"))
	p := &dashboard.Page{Name: "login", Title: "Sign in"}
	if token != "" && !control.ValidLoginLinkFormat(token) {
		p.Problem = "This sign-in link is not complete. Copy the whole link and try again."
	} else {
		p.Token = token
	}
	n.render(ctx, fasthttp.StatusOK, p)
}

// POST /dashboard/login: redeem the link, set the cookie, go to the overview.
func (n *Protocol) login(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	if !n.h.SameOrigin(ctx) {
		n.render(ctx, fasthttp.StatusForbidden, &dashboard.Page{Name: "login", Title: "Sign in",
			Problem: "Signing in works only from this service's own sign-in page."})
		return
	}
	secret, sess, err := n.h.Core().Login(ctx, ctx.PostArgs().Peek("token"))
	if err != nil {
		status, problem := fasthttp.StatusUnauthorized, "This sign-in link has been used or has expired. Ask for a new one: each link works once."
		switch {
		case errors.Is(err, synth.ErrLinkMalformed):
			problem = "This sign-in link is not valid. Ask for a new one."
		case !control.IsCode(err, control.EUnauthorized):
			n.h.Logger().Warn("dashboard sign-in", "request_id", string(web.RequestID(ctx)), "err", err)
			status, problem = fasthttp.StatusServiceUnavailable, "Signing in failed because the service cannot reach its database. Try the same link again in a moment."
		}
		n.render(ctx, status, &dashboard.Page{Name: "login", Title: "Sign in", Problem: problem})
		return
	}
	pageHeaders(ctx, valCSP)
	n.h.SetSessionCookie(ctx, secret, sess.ExpiresAt)
	ctx.Redirect("/dashboard/", fasthttp.StatusSeeOther)
}

// POST /dashboard/logout: end the session and forget the cookie.
func (n *Protocol) logout(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	if !n.h.SameOrigin(ctx) {
		n.render(ctx, fasthttp.StatusForbidden, &dashboard.Page{Name: "login", Title: "Sign out",
			Problem: "Signing out works only from the dashboard itself."})
		return
	}
	if err := n.h.Core().Logout(ctx, ctx.Request.Header.Cookie(web.SessionCookie)); err != nil {
		n.render(ctx, fasthttp.StatusServiceUnavailable, &dashboard.Page{Name: "login", Title: "Sign out",
			Problem: "Signing out failed because the service cannot reach its database. Try again in a moment."})
		return
	}
	pageHeaders(ctx, valCSP)
	n.h.SetSessionCookie(ctx, "", 0)
	ctx.Redirect("/dashboard/login", fasthttp.StatusSeeOther)
}

// GET /dashboard/static/{file}: the embedded scripts and styles.
func (n *Protocol) dashboardStatic(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	name, _ := ctx.UserValue("file").(string)
	b, ct, ok := dashboard.Static(name)
	pageHeaders(ctx, valCSP)
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		ctx.SetBodyString("not found")
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valStaticCache)
	ctx.SetContentType(ct)
	ctx.SetBody(b)
}
