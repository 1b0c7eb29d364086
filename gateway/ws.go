package gateway

import (
	"bufio"
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
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"voicesvc/control"
	"voicesvc/netpoll"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// WebSocket upgrades (web.Host.Upgrade), for every protocol that has a
// realtime socket: the native one (docs/realtime.md) and the dialects'.
//
// Everything that can refuse a session is checked before the upgrade, so a
// refusal is an ordinary HTTP response in the protocol's error shape:
// credentials and the request rate (the route wrapper), the handshake
// itself, then the core's admission of a session (the engine, the balance,
// a session slot, the streaming feature, one concurrent-stream slot, the
// token). The 101 carries X-Request-Id, RateLimit, RateLimit-Policy and
// X-Billing-Remaining like any synthesis response.
//
// The session is served outside fasthttp's hijack handler (see upgrade:
// that is what lets fasthttp take back the request's memory), with no
// goroutine of its own while it waits for its client: the server's one
// poller watches every session's socket (package netpoll). It holds its
// session slot and its one stream slot until the socket closes, however
// many contexts it runs.

// wsState is the server's WebSocket machinery (Server.ws).
type wsState struct {
	up  websocket.Upgrader
	reg *sessions.Registry
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
	// firstPending counts the sockets waiting for their first message
	// (sessions.FirstMessage): they hold no slot of any workspace, so
	// this bounds them, beyond which a handshake is refused 503.
	firstPending atomic.Int32
}

// maxFirstMessagePending bounds wsState.firstPending.
const maxFirstMessagePending = 1024

// firstMessageKey is the ctx user value by which the route wrapper hands
// a handshake without credentials on a FirstMessage route to Upgrade.
var firstMessageKey = []byte("voicesvc.firstMessage")

// shutdownLinger is how long shutdown still waits for sessions once its
// grace is over: each sends its last frames and close (bounded by the
// write timeout when the client is slow; this bounds the wait instead).
const shutdownLinger = 2 * time.Second

var (
	hdrWSKey            = []byte("Sec-WebSocket-Key")
	hdrWSVersion        = []byte("Sec-WebSocket-Version")
	errNotWebSocket     = control.Errorf(control.EInvalidRequest, "a WebSocket handshake (version 13) is required")
	errFirstMessageBusy = &control.Error{Code: control.EUnavailable, RetryAfter: 1,
		Message: "too many sockets are waiting for their first message; retry"}
)

// wsInit makes the WebSocket machinery (called from routes).
func (s *Server) wsInit() {
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
			// Credentials are never cookies, so any origin may connect.
			CheckOrigin:       func(*http.Request) bool { return true },
			EnableCompression: false,
			HandshakeTimeout:  10 * time.Second,
			// isWebSocketHandshake has refused, with a JSON answer, every
			// request the upgrader would refuse; by the time it runs the
			// connection is hijacked and the caller closes it.
			Error: func(http.ResponseWriter, *http.Request, int, error) {},
		},
		reg:    sessions.NewRegistry(s.core.KeyRevoked),
		ctx:    ctx,
		cancel: cancel,
	}
}

// sessionConfig is the native sessions' configuration.
func (s *Server) sessionConfig() sessions.Config {
	return sessions.Config{IdleTimeout: s.cfg.WSIdleTimeout, MaxFrame: 1 << 20}
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
	w.reg.Drain()
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
	w.reg.Stop()
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

// Upgrade checks the handshake, admits the session with the core, then
// upgrades and serves it (web.Host). p passed the route wrapper; nil: the
// handshake had no credentials, and the socket's first message brings
// them (sessions.FirstMessage: read, refused or admitted after the 101).
func (h *protoHost) Upgrade(ctx *fasthttp.RequestCtx, p *control.Principal, subprotocols []string, open web.OpenSession) {
	s, w := h.s, h.s.ws
	var err error
	if !isWebSocketHandshake(ctx) {
		err = errNotWebSocket
	}
	var a *synth.Admission
	first, _ := ctx.UserValueBytes(firstMessageKey).(*route)
	switch {
	case err != nil:
	case p == nil && first == nil:
		err = errUnauthorized // only the route wrapper makes a nil p, and only so
	case p == nil && w.firstPending.Add(1) > maxFirstMessagePending:
		w.firstPending.Add(-1)
		err = errFirstMessageBusy
	case p != nil:
		// The core's admission of a session: the engine, the balance, a
		// session slot, the streaming feature, a stream slot, the token.
		a, err = s.core.Admit(ctx, p, synth.SessionAsk)
		setAdmissionHeaders(ctx, a, err)
	}
	if err != nil {
		h.WriteError(ctx, err)
		return
	}
	reqID := string(web.RequestID(ctx))
	authAt := reqStart(ctx)
	// The contexts' metrics and spans, linked to the handshake's span.
	o := &sessions.Observer{Series: h.Series(telemetry.WebSocket), Contexts: s.synth.m.Contexts, Tracer: s.tracer}
	if rs := requestSpan(ctx); rs != nil {
		o.Link = trace.Link{SpanContext: rs.span.SpanContext()}
	}
	env := web.SessionEnv{Principal: p, Admission: a, Observer: o}
	up := newWSUpgrade(ctx, subprotocols)
	// The upgrader writes the 101 (with up.hdr) on the hijacked socket;
	// fasthttp writes nothing. The status is for metrics and the log.
	ctx.SetStatusCode(fasthttp.StatusSwitchingProtocols)
	ctx.HijackSetNoResponse(true)
	w.wg.Add(1)
	ctx.Hijack(func(c net.Conn) {
		// fasthttp runs this on a goroutine of its own, without a recover
		// (upgrade, Accept and serveSession recover their own panics).
		conn, buffered, err := w.upgrade(c, up)
		if p == nil {
			if err == nil {
				// Before the first message: a revocation from now on ends
				// the session (the registry checks from authAt).
				authAt = time.Now()
				env.Principal, env.Admission, buffered, err = first.firstMessage.Accept(w.ctx, conn, buffered,
					s.cfg.WSFirstMessageTimeout, func(p *control.Principal) (*synth.Admission, error) {
						return s.core.AdmitSession(w.ctx, p, first.scope)
					})
				if err != nil {
					conn.Close()
				}
			}
			w.firstPending.Add(-1)
		}
		if err != nil {
			// Nothing was promised to the client (the 101 was not
			// written, or the first message was refused) and nothing
			// was charged.
			w.wg.Done()
			a.Done(0)
			s.log.Info("websocket session not served", "request_id", reqID, "err", err)
			return
		}
		s.serveSession(conn, buffered, env, open, reqID, authAt)
	})
}

// serveSession serves an upgraded, admitted socket: open makes its
// session, registered under its principal's key (authenticated at authAt:
// a revocation since ends it), served on the poller with buffered (the
// client's bytes already read) decoded first. Once the session is over the
// socket is closed, the admission ended and w.wg released (the caller
// added to it). It runs on the hijack handler's goroutine.
func (s *Server) serveSession(conn *websocket.Conn, buffered []byte, env web.SessionEnv, open web.OpenSession,
	reqID string, authAt time.Time) {
	w, a := s.ws, env.Admission
	wsID, keyID, keyExpires := env.Principal.WorkspaceID, env.Principal.KeyID, env.Principal.ExpiresAt
	opened := time.Now()
	s.synth.m.Sessions.Inc()
	var x web.Session
	var once sync.Once
	done := func(rerr error) {
		once.Do(func() {
			if x != nil {
				w.reg.Remove(x, keyID)
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
	x = open(conn, env)
	w.reg.Add(x, keyID, keyExpires, authAt)
	// The session runs on no goroutine of its own: the poller starts
	// one when its client sends (sessions.Serve). done runs on the
	// session's last goroutine once it has ended.
	x.Serve(w.ctx, w.sessionPoller(), buffered, done)
	// Returning lets fasthttp put the RequestCtx and its reader back in
	// their pools while the session runs.
}

// wsUpgrade is what the hijack handler needs from the handshake request,
// copied out of the RequestCtx: the handler must not keep references into
// it, and fasthttp reuses it once the handler returns.
type wsUpgrade struct {
	req *http.Request // the handshake headers the upgrader reads
	hdr http.Header   // the 101's headers other than the handshake's own
	// subprotocols are those the protocol may select.
	subprotocols []string
}

// wsUpgradeRequest are the request headers the upgrader reads.
var wsUpgradeRequest = []string{"Connection", "Upgrade", "Sec-Websocket-Version", "Sec-Websocket-Key", "Sec-Websocket-Protocol"}

// wsUpgradeOwn are response headers the 101 does not take from ctx: the
// upgrader writes the handshake's own; the rest describe a body it has not.
var wsUpgradeOwn = []string{"Connection", "Upgrade", "Content-Length", "Content-Type", "Transfer-Encoding",
	"Date", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions"}

func newWSUpgrade(ctx *fasthttp.RequestCtx, subprotocols []string) *wsUpgrade {
	u := &wsUpgrade{subprotocols: subprotocols, req: &http.Request{Method: http.MethodGet, Header: make(http.Header, len(wsUpgradeRequest))},
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
	up := w.up // a copy: the protocol's subprotocols
	up.Subprotocols = u.subprotocols
	conn, err = up.Upgrade(rw, u.req, u.hdr)
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
