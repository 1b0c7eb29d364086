package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/netpoll"
	"voicesvc/sessions"
	"voicesvc/synth"
)

// GET {api_root}/stream: the realtime WebSocket (docs/realtime.md).
//
// Everything that can refuse a session is checked before the upgrade, so a
// refusal is an ordinary HTTP response with the JSON bodies of the other
// routes: credentials (5.3 order), requests per second, the handshake
// itself, the engine, the balance, the workspace's open sessions
// (too_many_sessions), then admit (streaming feature, one concurrent-stream
// slot, token consumption). The 101 carries X-Request-Id, RateLimit,
// RateLimit-Policy and X-Billing-Remaining like any synthesis response.
//
// The session is served outside fasthttp's hijack handler (see upgrade:
// that is what lets fasthttp take back the request's memory), with no
// goroutine of its own while it waits for its client: the server's one
// poller watches every session's socket (sessions.Serve, package netpoll).
// It holds its session slot and its one stream slot until the socket
// closes, however many contexts it runs.

// wsSubprotocol is the versioned subprotocol; a client that sends its
// token as a second subprotocol gets this one selected.
const wsSubprotocol = "service.v1"

// wsState is the server's WebSocket machinery (Server.ws).
type wsState struct {
	up  websocket.Upgrader
	cfg sessions.Config
	reg *wsRegistry
	// poller watches the idle sessions' sockets. It is made by the first
	// session (a server that serves none holds no descriptor for it) and
	// closed by shutdown; nil (it could not be made, or shutdown came
	// first) serves each session on a goroutine of its own.
	pollOnce sync.Once
	poller   *netpoll.Poller
	log      *slog.Logger
	// ctx ends every open session when shutdown's grace is over (fatal
	// shutting_down, close 1001); wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// shutdownLinger is how long shutdown still waits for sessions once its
// grace is over: each sends its last frames and close (bounded by the
// write timeout when the client is slow; this bounds the wait instead).
const shutdownLinger = 2 * time.Second

var (
	hdrDeprecation  = []byte("Deprecation")
	valDeprecated   = []byte("true")
	hdrWSProtocol   = []byte("Sec-WebSocket-Protocol")
	hdrWSKey        = []byte("Sec-WebSocket-Key")
	hdrWSVersion    = []byte("Sec-WebSocket-Version")
	argAccessToken  = []byte("access_token")
	argAPIKey       = []byte("api_key")
	errNotWebSocket = control.Errorf(control.EInvalidRequest, "a WebSocket handshake (version 13) is required")
)

// wsRoutes registers the WebSocket route (called from routes).
func (s *Server) wsRoutes(api *router.Group) {
	ctx, cancel := context.WithCancel(context.Background())
	s.ws = &wsState{
		log: s.log,
		up: websocket.Upgrader{
			// The session reads frames from the socket itself (into
			// pooled buffers), so the Conn's reader is never used: the
			// smallest the library takes. Writes borrow a pooled buffer
			// per message (the session's close frames).
			ReadBufferSize:  125,
			WriteBufferSize: 1024,
			WriteBufferPool: &sync.Pool{},
			Subprotocols:    []string{wsSubprotocol},
			// Credentials are never cookies, so any origin may connect.
			CheckOrigin:       func(*http.Request) bool { return true },
			EnableCompression: false,
			HandshakeTimeout:  10 * time.Second,
			// isWebSocketHandshake has refused, with a JSON answer, every
			// request the upgrader would refuse; by the time it runs the
			// connection is hijacked and the caller closes it.
			Error: func(http.ResponseWriter, *http.Request, int, error) {},
		},
		cfg:    sessions.Config{IdleTimeout: s.cfg.WSIdleTimeout, MaxFrame: 1 << 20},
		reg:    newWSRegistry(s.keyRevoked),
		ctx:    ctx,
		cancel: cancel,
	}
	rt := s.apiRoute("GET /stream", control.ScopeTTS, withTokens)
	api.GET("/stream", func(ctx *fasthttp.RequestCtx) {
		start := reqStart(ctx)
		s.begin(ctx, rt)
		defer s.finish(ctx, rt, start)
		s.wsHandshake(ctx)
	})
}

// shutdown drains the sessions: those with no open context end at once,
// the others may finish their contexts until ctx ends (a task_start gets a
// non-fatal shutting_down meanwhile), and each ends with a fatal error
// shutting_down and close 1001 as its last context ends. When ctx ends,
// every session still open ends that way at once, its unspoken text
// refunded. It returns once every session has closed, or shutdownLinger
// after ctx ends. Sessions that upgrade meanwhile are drained too. It is
// safe to call concurrently with the HTTP server's shutdown.
func (w *wsState) shutdown(ctx context.Context) {
	if w == nil {
		return
	}
	w.reg.drain()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.cancel()
		select {
		case <-done:
		case <-time.After(shutdownLinger):
		}
	}
	w.cancel()
	w.reg.stop()
	w.pollOnce.Do(func() {}) // no poller from here on
	if w.poller != nil {
		w.poller.Close() // sessions still open end as at shutdown (1001)
	}
}

// sessionPoller is the poller the sessions are served with (see poller).
func (w *wsState) sessionPoller() *netpoll.Poller {
	w.pollOnce.Do(func() {
		p, err := netpoll.New()
		if err != nil {
			w.log.Warn("websocket sessions will each keep a goroutine", "err", err)
			return
		}
		w.poller = p
	})
	return w.poller
}

// wsHandshake checks everything, then upgrades and runs the session.
func (s *Server) wsHandshake(ctx *fasthttp.RequestCtx) {
	p, err := s.wsAuthenticate(ctx)
	if err == nil {
		err = s.admitRequest(ctx, p)
	}
	if err == nil && !isWebSocketHandshake(ctx) {
		err = errNotWebSocket
	}
	var a *synth.Admission
	if err == nil {
		// The core's admission of a session: the engine, the balance, a
		// session slot, the streaming feature, a stream slot, the token.
		a, err = s.core.Admit(ctx, p, synth.Ask{Streaming: true, Session: true})
		setAdmissionHeaders(ctx, a, err)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	reqID := string(requestID(ctx))
	authAt := reqStart(ctx)
	deps := sessions.Deps{
		Engine:   s.engine,
		Engines:  s.engines,
		Voice:    func(c context.Context, ref string) (*control.Voice, error) { return s.core.Voice(c, p, ref) },
		Billing:  a,
		Logger:   s.log,                // not a With per session: an idle session stays small
		Observer: s.wsObserverFor(ctx), // metrics and spans (wsobserve.go)
	}
	w := s.ws
	up := newWSUpgrade(ctx)
	wsID, keyID, keyExpires := p.WorkspaceID, p.KeyID, p.ExpiresAt
	// The upgrader writes the 101 (with up.hdr) on the hijacked socket;
	// fasthttp writes nothing. The status is for metrics and the log.
	ctx.SetStatusCode(fasthttp.StatusSwitchingProtocols)
	ctx.HijackSetNoResponse(true)
	w.wg.Add(1)
	ctx.Hijack(func(c net.Conn) {
		// fasthttp runs this on a goroutine of its own, without a recover.
		conn, buffered, err := w.upgrade(c, up)
		if err != nil {
			// Nothing was promised to the client (the 101 was not
			// written) and the handshake charged nothing.
			w.wg.Done()
			a.Done(0)
			s.log.Info("websocket upgrade failed", "request_id", reqID, "err", err)
			return
		}
		opened := time.Now()
		s.synth.m.Sessions.Inc()
		var x *sessions.Session
		var once sync.Once
		done := func(rerr error) {
			once.Do(func() {
				if x != nil {
					w.reg.remove(x, keyID)
				}
				// fasthttp keeps hijacked connections open
				// (KeepHijackedConns): closing it is ours.
				conn.Close()
				a.Done(0) // the handshake charged nothing: no refund call
				s.synth.m.Sessions.Dec()
				w.wg.Done()
				s.log.Info("websocket session closed", "request_id", reqID, "workspace", wsID,
					"duration", time.Since(opened), "reason", errText(rerr))
			})
		}
		defer func() {
			// A panic here would end the process. Past Serve's start the
			// session recovers its own and calls done; before, this ends
			// it (closing the socket ends whatever of it already runs,
			// and once keeps a later done from releasing twice).
			if v := recover(); v != nil {
				s.log.Error("panic in websocket session", "request_id", reqID, "panic", v, "stack", string(debug.Stack()))
				done(fmt.Errorf("panic: %v", v))
			}
		}()
		x = sessions.New(conn, w.cfg, deps)
		w.reg.add(x, keyID, keyExpires, authAt)
		// The session runs on no goroutine of its own: the poller starts
		// one when its client sends (sessions.Serve). done runs on the
		// session's last goroutine once it has ended.
		x.Serve(w.ctx, w.sessionPoller(), buffered, done)
		// Returning lets fasthttp put the RequestCtx and its reader back in
		// their pools while the session runs.
	})
}

// wsUpgrade is what the hijack handler needs from the handshake request,
// copied out of the RequestCtx: the handler must not keep references into
// it, and fasthttp reuses it once the handler returns.
type wsUpgrade struct {
	req *http.Request // the handshake headers the upgrader reads
	hdr http.Header   // the 101's headers other than the handshake's own
}

// wsUpgradeRequest are the request headers the upgrader reads.
var wsUpgradeRequest = []string{"Connection", "Upgrade", "Sec-Websocket-Version", "Sec-Websocket-Key", "Sec-Websocket-Protocol"}

// wsUpgradeOwn are response headers the 101 does not take from ctx: the
// upgrader writes the handshake's own; the rest describe a body it has not.
var wsUpgradeOwn = []string{"Connection", "Upgrade", "Content-Length", "Content-Type", "Transfer-Encoding",
	"Date", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions"}

func newWSUpgrade(ctx *fasthttp.RequestCtx) *wsUpgrade {
	u := &wsUpgrade{req: &http.Request{Method: http.MethodGet, Header: make(http.Header, len(wsUpgradeRequest))},
		hdr: make(http.Header, ctx.Response.Header.Len())}
	for _, k := range wsUpgradeRequest {
		if v := ctx.Request.Header.Peek(k); len(v) > 0 {
			u.req.Header[k] = []string{string(v)}
		}
	}
	ctx.Response.Header.VisitAll(func(k, v []byte) {
		for _, own := range wsUpgradeOwn {
			if strings.EqualFold(string(k), own) {
				return
			}
		}
		u.hdr[string(k)] = append(u.hdr[string(k)], string(v))
	})
	return u
}

// upgrade writes the 101 on the hijacked connection c and returns the
// session's websocket.Conn over the socket itself.
//
// Why not FastHTTPUpgrader: its Conn reads through c, and c reads through
// the connection's fasthttp bufio.Reader (Config.ReadBufferSize, 16 KiB),
// which fasthttp gives back to its pool, with the RequestCtx, when the
// hijack handler returns. That Conn is only usable inside the handler, so
// every idle session kept a RequestCtx, that reader and the handler's
// goroutine. Here the Conn reads the socket (UnsafeConn) directly, the
// server keeps hijacked connections open (KeepHijackedConns) and the
// handler returns at once.
//
// A client may send frames right behind its handshake, before the 101:
// those bytes are in fasthttp's reader already. They are taken out first
// and returned (buffered), for the session to decode before the socket;
// the upgrader gets an empty reader, so that its Conn's NetConn is the
// socket itself, which the session reads and the poller watches.
func (w *wsState) upgrade(c net.Conn, u *wsUpgrade) (conn *websocket.Conn, buffered []byte, err error) {
	defer func() {
		// fasthttp runs the hijack handler without a recover: a panic
		// here would end the process.
		if v := recover(); v != nil {
			c.Close() // KeepHijackedConns: this closes the socket
			conn, buffered, err = nil, nil, fmt.Errorf("panic: %v", v)
		}
	}()
	uc, ok := c.(interface{ UnsafeConn() net.Conn })
	if !ok {
		c.Close()
		return nil, nil, errors.New("gateway: fasthttp's hijacked connection has no UnsafeConn")
	}
	raw := uc.UnsafeConn()
	buffered, err = takeBuffered(c, raw)
	if err != nil {
		raw.Close()
		return nil, nil, err
	}
	// Unused: nothing buffered, so the Conn reads raw (and never does).
	br := bufio.NewReaderSize(raw, 16)
	// The upgrader builds the 101 in the writer's free buffer.
	rw := &hijackedResponse{conn: raw, brw: bufio.NewReadWriter(br, bufio.NewWriterSize(raw, 512))}
	conn, err = w.up.Upgrade(rw, u.req, u.hdr)
	if err != nil {
		raw.Close() // the upgrader closes it only for failures after Hijack
		return nil, nil, err
	}
	return conn, buffered, nil
}

// takeBuffered returns the bytes fasthttp's reader holds beyond the
// handshake request. c reads that reader, which reads raw once empty: with
// raw's read deadline in the past, c gives back what is buffered, then a
// timeout without reading the socket (the deadline is checked before the
// read), so nothing on the wire is consumed.
func takeBuffered(c, raw net.Conn) ([]byte, error) {
	if err := raw.SetReadDeadline(time.Unix(1, 0)); err != nil {
		return nil, err
	}
	var pending []byte
	var b [512]byte
	for {
		n, err := c.Read(b[:])
		pending = append(pending, b[:n]...)
		if err != nil || n == 0 {
			break // a timeout once the buffer is empty (or what the socket said)
		}
	}
	return pending, raw.SetReadDeadline(time.Time{})
}

// hijackedResponse is the http.ResponseWriter the net/http upgrader takes:
// it only hijacks it. Its refusals write nothing (see wsState.up.Error).
type hijackedResponse struct {
	conn net.Conn
	brw  *bufio.ReadWriter
}

func (r *hijackedResponse) Header() http.Header         { return http.Header{} }
func (r *hijackedResponse) Write(b []byte) (int, error) { return len(b), nil }
func (r *hijackedResponse) WriteHeader(int)             {}

func (r *hijackedResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return r.conn, r.brw, nil
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// wsAuthenticate finds the credentials of a handshake in the order of
// the docs: X-API-Key; the subprotocol list ["service.v1", token];
// access_token; the deprecated api_key query parameter, whose responses
// carry a Deprecation header. The first form present decides: a bad one is
// 401 (token_invalid for tokens), never a fall-through to the next.
func (s *Server) wsAuthenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	var p *control.Principal
	var err error
	q := ctx.QueryArgs()
	switch {
	case len(ctx.Request.Header.PeekBytes(hdrAPIKey)) > 0:
		p, err = s.authKey(ctx.Request.Header.PeekBytes(hdrAPIKey))
	case len(protocolToken(ctx.Request.Header.PeekBytes(hdrWSProtocol))) > 0:
		p, err = s.tokenPrincipal(ctx, protocolToken(ctx.Request.Header.PeekBytes(hdrWSProtocol)), nil)
	case len(q.PeekBytes(argAccessToken)) > 0:
		p, err = s.tokenPrincipal(ctx, q.PeekBytes(argAccessToken), nil)
	case len(q.PeekBytes(argAPIKey)) > 0:
		ctx.Response.Header.SetCanonical(hdrDeprecation, valDeprecated)
		p, err = s.authKey(q.PeekBytes(argAPIKey))
	default:
		return nil, errUnauthorized
	}
	if err != nil {
		return nil, err
	}
	if !p.Has(control.ScopeTTS) {
		return nil, errScope
	}
	return p, nil
}

// protocolToken returns the credential of a `Sec-WebSocket-Protocol:
// service.v1, <token>` list: the first item other than service.v1, when
// service.v1 is offered too.
func protocolToken(h []byte) []byte {
	var tok []byte
	found := false
	for len(h) > 0 {
		item := h
		if i := bytes.IndexByte(h, ','); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		item = bytes.TrimSpace(item)
		switch {
		case string(item) == wsSubprotocol:
			found = true
		case tok == nil && len(item) > 0:
			tok = item
		}
	}
	if !found {
		return nil
	}
	return tok
}

// isWebSocketHandshake checks what the upgrader would refuse, so that a bad
// handshake is refused before it spends a token or takes a slot.
// The key must be base64 of 16 bytes (RFC 6455 4.1), as the upgrader checks.
func isWebSocketHandshake(ctx *fasthttp.RequestCtx) bool {
	if !ctx.IsGet() || !websocket.FastHTTPIsWebSocketUpgrade(ctx) ||
		string(ctx.Request.Header.PeekBytes(hdrWSVersion)) != "13" {
		return false
	}
	return oneWSKey(&ctx.Request.Header) && validWSKey(ctx.Request.Header.PeekBytes(hdrWSKey))
}

// validWSKey reports whether key is base64 of exactly 16 bytes. The length
// is checked before decoding: the key is untrusted, and a longer one would
// not fit the nonce.
func validWSKey(key []byte) bool {
	if len(key) != 24 {
		return false
	}
	var nonce [18]byte // 24 base64 characters decode to at most 18 bytes
	n, err := base64.StdEncoding.Decode(nonce[:], key)
	return err == nil && n == 16
}
