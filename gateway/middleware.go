package gateway

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/web"
)

// handlerFunc is an authenticated API handler: p has the route's scope (nil only
// as web.Route.FirstMessage says). It must end in exactly one answer (web.WriteData, an audio body, or writeError), and
// must not keep ctx after it returns. p belongs to this request alone and
// is never changed by the server, so a stream writer may keep it.
type handlerFunc = web.Handler

// creds are the credentials a route takes besides an API key in X-API-Key
// (docs/api.md#authentication).
type credKind uint8

const (
	keysOnly credKind = iota
	// withTokens: `Authorization: Bearer vst_...` access tokens too (speak,
	// stream, the WebSocket).
	withTokens
	// withBearerKeys: `Authorization: Bearer vsk_...` API keys too (the
	// compatible endpoint, docs/api.md#compatible-speech).
	withBearerKeys
	// sessionOnly: the dashboard session alone (key management, session.go).
	sessionOnly
)

// route is what the wrapper knows about one registered route.
type route struct {
	name  string // metrics and log label: "GET /voices/{id}"
	scope string // scope required of an API key; "" = no authentication
	// tokens and bearerKeys: the route's creds (withTokens,
	// withBearerKeys), as the authentication reads them.
	tokens      bool
	bearerKeys  bool
	sessionOnly bool
	// cors: answer with CORS headers (API routes, docs/api.md#headers).
	cors bool
	// auth, when set, authenticates instead of the header forms (a
	// protocol's own credentials, web.Route.Auth).
	auth func(ctx *fasthttp.RequestCtx) (*control.Principal, error)
	// firstMessage: web.Route.FirstMessage.
	firstMessage *sessions.FirstMessage

	latency prometheus.Observer
	byCode  [500]atomic.Pointer[prometheus.Counter] // status 100-599
	m       *metrics
}

// routes registers every route: the protocols' (host.go), then the
// server's own (health, metrics, the dashboard's pages, /docs/).
func (s *Server) routes() {
	r := router.New()
	// Redirects would answer API clients with 301/308 and no envelope.
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.HandleMethodNotAllowed = true
	r.HandleOPTIONS = false // the preflight route below answers OPTIONS
	s.router = r
	s.streamPaths = []string{"/stream"} // the WebSocket upgrade
	s.errorRoute = s.newRoute("error", "", true)
	r.NotFound = s.plain(s.newRoute("unmatched", "", true), s.notFound)
	r.MethodNotAllowed = s.plain(s.newRoute("method_not_allowed", "", true), s.methodNotAllowed)

	api := r.Group(APIRoot)
	s.apiGroup = api
	// Each protocol package registers its routes (host.go): the native
	// resources, speak, SSE and WebSocket, the OpenAI dialect, ...
	s.wsInit()
	for _, p := range s.protocols {
		for _, prefix := range p.Prefixes() {
			s.prefixes = append(s.prefixes, protoPrefix{prefix, p})
		}
		p.Register(&protoHost{s: s, proto: p})
	}

	// The dashboard's pages are the native protocol's; its cookie session
	// is authenticated here (auth.go, session.go). This router cannot hold
	// both /dashboard and /dashboard/: GET /dashboard (no slash) is
	// redirected on its way to the 404.
	unmatched, dash := r.NotFound, s.plain(s.newRoute("GET /dashboard/{page}", "", false), func(ctx *fasthttp.RequestCtx) {
		ctx.Redirect("/dashboard/", fasthttp.StatusFound)
	})
	r.NotFound = func(ctx *fasthttp.RequestCtx) {
		if ctx.IsGet() && string(ctx.Path()) == "/dashboard" {
			dash(ctx)
			return
		}
		unmatched(ctx)
	}

	api.OPTIONS("/{path:*}", s.plain(s.newRoute("OPTIONS preflight", "", true), s.preflight))

	r.GET("/healthz", s.plain(s.newRoute("GET /healthz", "", false), s.healthz))
	r.GET("/readyz", s.plain(s.newRoute("GET /readyz", "", false), s.readyz))
	r.GET("/metrics", s.plain(s.newRoute("GET /metrics", "", false), s.metrics.serve))
}

func (s *Server) newRoute(name, scope string, cors bool) *route {
	return &route{name: name, scope: scope, cors: cors, m: s.metrics,
		latency: s.metrics.latency.WithLabelValues(name)}
}

// apiRoute describes an authenticated API route: its scope and the
// credentials it takes besides X-API-Key.
func (s *Server) apiRoute(name, scope string, c credKind) *route {
	rt := s.newRoute(name, scope, true)
	rt.tokens, rt.bearerKeys, rt.sessionOnly = c == withTokens, c == withBearerKeys, c == sessionOnly
	return rt
}

// registrar is a router or a group of it: where a route is registered.
type registrar interface {
	Handle(method, path string, handler fasthttp.RequestHandler)
}

func (s *Server) handle(g registrar, method, path string, rt *route, h handlerFunc) {
	g.Handle(method, path, func(ctx *fasthttp.RequestCtx) {
		start := reqStart(ctx)
		s.begin(ctx, rt)
		defer s.finish(ctx, rt, start)
		var p *control.Principal
		var err error
		switch {
		case rt.sessionOnly:
			p, err = s.sessionOnly(ctx)
		case rt.auth != nil:
			if p, err = rt.auth(ctx); err == nil && !p.Has(rt.scope) {
				p, err = nil, synth.ScopeError(rt.scope)
			}
			if err != nil && rt.firstMessage != nil && errors.Is(err, sessions.ErrNoCredentials) && isWebSocketHandshake(ctx) {
				ctx.SetUserValueBytes(firstMessageKey, rt) // Upgrade admits by the first message
				h(ctx, nil)
				return
			}
		default:
			p, err = s.authenticate(ctx, rt)
		}
		if err == nil {
			err = s.admitRequest(ctx, p) // requests per second (the core's AllowRequest)
		}
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		h(ctx, p)
	})
}

// plain wraps an unauthenticated handler (health, metrics, 404, 405,
// preflight) with the same request id, CORS, metrics and logging.
func (s *Server) plain(rt *route, h fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		start := reqStart(ctx)
		s.begin(ctx, rt)
		defer s.finish(ctx, rt, start)
		h(ctx)
	}
}

var (
	hdrRequestID     = []byte("X-Request-Id")
	hdrACAO          = []byte("Access-Control-Allow-Origin")
	hdrACEH          = []byte("Access-Control-Expose-Headers")
	hdrACAM          = []byte("Access-Control-Allow-Methods")
	hdrACAH          = []byte("Access-Control-Allow-Headers")
	hdrACMA          = []byte("Access-Control-Max-Age")
	valAnyOrigin     = []byte("*")
	valExposeHeaders = []byte("RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, X-Billing-Remaining, " +
		"X-Sample-Rate, X-Audio-Format, X-Channels, Idempotent-Replayed, Deprecation")
	valAllowMethods = []byte("GET, POST, PUT, PATCH, DELETE, OPTIONS")
	valAllowHeaders = []byte("X-API-Key, Authorization, Content-Type, Idempotency-Key, X-Request-Id")
	valMaxAge       = []byte("600")
)

// begin stamps the request id and, on API routes, the CORS headers before
// anything else can answer, so that every response carries them.
func (s *Server) begin(ctx *fasthttp.RequestCtx, rt *route) {
	h := &ctx.Response.Header
	if id := ctx.Request.Header.PeekBytes(hdrRequestID); validRequestID(id) {
		h.SetCanonical(hdrRequestID, id)
	} else {
		var buf [28]byte
		h.SetCanonical(hdrRequestID, newRequestID(&buf))
	}
	if rt.cors {
		// Keys travel in headers, never cookies, so any origin may call.
		h.SetCanonical(hdrACAO, valAnyOrigin)
		h.SetCanonical(hdrACEH, valExposeHeaders)
	}
	if s.tracer != nil && rt.scope != "" { // API routes (tracing.go)
		s.startSpan(ctx, rt)
	}
}

// finish recovers a panicking handler, then records metrics and the access
// log line. It runs deferred, so it sees the final status.
func (s *Server) finish(ctx *fasthttp.RequestCtx, rt *route, start time.Time) {
	if v := recover(); v != nil {
		s.log.Error("panic in handler", "route", rt.name, "request_id", string(web.RequestID(ctx)),
			"panic", v, "stack", string(debug.Stack()))
		ctx.Response.ResetBody()
		s.writeError(ctx, control.Errorf(control.EInternal, "panic: %v", v))
	}
	status := ctx.Response.StatusCode()
	d := time.Since(start)
	rt.observe(status, d)
	if s.tracer != nil {
		s.finishSpan(ctx)
	}
	if s.log.Enabled(context.Background(), slog.LevelInfo) {
		s.log.LogAttrs(context.Background(), slog.LevelInfo, "request",
			slog.String("request_id", string(web.RequestID(ctx))),
			slog.String("route", rt.name),
			slog.String("method", string(ctx.Method())),
			slog.Int("status", status),
			slog.Duration("duration", d))
	}
}

func (rt *route) observe(status int, d time.Duration) {
	rt.latency.Observe(d.Seconds())
	i := status - 100
	if i < 0 || i >= len(rt.byCode) {
		i = 500 - 100 // nonsense statuses count as 500
	}
	c := rt.byCode[i].Load()
	if c == nil {
		cv := rt.m.requests.WithLabelValues(rt.name, statusText(i+100))
		c = &cv
		rt.byCode[i].Store(c)
	}
	(*c).Inc()
}

// reqStart is when fasthttp handed the request, read whole, to the
// handler; it saves a clock read per request. Contexts made outside a server (tests,
// fuzzing) have none.
func reqStart(ctx *fasthttp.RequestCtx) time.Time {
	if t := ctx.Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// validRequestID: an incoming X-Request-Id of 1-128 printable ASCII
// characters is kept, so that a caller's trace id survives the hop.
func validRequestID(id []byte) bool { return printableASCII(id, 128) }

// printableASCII: 1 to max printable ASCII characters (request ids,
// Idempotency-Key).
func printableASCII(b []byte, max int) bool {
	if len(b) == 0 || len(b) > max {
		return false
	}
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

const hexDigits = "0123456789abcdef"

// newRequestID writes "req_" + 24 hex into buf. Request ids need to be
// unique, not secret, so the runtime's fast per-thread generator does.
func newRequestID(buf *[28]byte) []byte {
	copy(buf[:], "req_")
	a, b := rand.Uint64(), rand.Uint32()
	for i := 0; i < 16; i++ {
		buf[4+i] = hexDigits[a>>(60-4*i)&0xf]
	}
	for i := 0; i < 8; i++ {
		buf[20+i] = hexDigits[b>>(28-4*i)&0xf]
	}
	return buf[:]
}

// preflight answers CORS preflight requests for any API path. It allows
// every request header the browser asks for: SDKs add their own (the
// widely used third-party client sends x-stainless-*), and credentials
// travel in headers the server checks anyway, so a header list gains
// nothing. A request list that is not a plain header-name list gets the
// fixed one.
func (s *Server) preflight(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetCanonical(hdrACAM, valAllowMethods)
	if asked := ctx.Request.Header.PeekBytes(hdrACRH); headerNameList(asked) {
		h.SetCanonical(hdrACAH, asked)
	} else {
		h.SetCanonical(hdrACAH, valAllowHeaders)
	}
	h.SetCanonical(hdrVary, valVaryPreflight)
	h.SetCanonical(hdrACMA, valMaxAge)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

var (
	hdrACRH          = []byte("Access-Control-Request-Headers")
	hdrVary          = []byte("Vary")
	valVaryPreflight = []byte("Access-Control-Request-Headers")
)

// maxACRH bounds the echoed list: browsers send a few hundred bytes.
const maxACRH = 4096

// tchars are the punctuation a header name (an RFC 9110 token) may hold.
const tchars = "!#$%&'*+-.^_`|~"

// headerNameList: a non-empty, bounded list of header names (RFC 9110
// tokens) separated by commas and spaces, safe to echo.
func headerNameList(b []byte) bool {
	if len(b) == 0 || len(b) > maxACRH {
		return false
	}
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == ',' || c == ' ' || c == '\t':
		case strings.IndexByte(tchars, c) >= 0:
		default:
			return false
		}
	}
	return true
}

func (s *Server) notFound(ctx *fasthttp.RequestCtx) {
	s.writeError(ctx, errNotFound)
}

func (s *Server) methodNotAllowed(ctx *fasthttp.RequestCtx) {
	s.writeError(ctx, control.Errorf(control.EMethodNotAllowed, "method not allowed"))
}
