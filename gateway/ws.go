package gateway

import (
	"bytes"
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/sessions"
)

// GET {api_root}/stream: the realtime WebSocket (interface 4.11, 5.3, 6.2).
//
// Everything that can refuse a session is checked before the upgrade, so a
// refusal is an ordinary HTTP response with the JSON bodies of the other
// routes: credentials (5.3 order), requests per second, the handshake
// itself, the engine, the balance, the workspace's open sessions
// (too_many_sessions), then admit (streaming feature, one concurrent-stream
// slot, token consumption). The 101 carries X-Request-Id, RateLimit,
// RateLimit-Policy and X-Billing-Remaining like any synthesis response.
//
// The session runs inside the upgrade handler (fasthttp/websocket must not
// be used after it returns) and holds its session slot and its one stream
// slot until the socket closes, however many contexts it runs.

// wsSubprotocol is the subprotocol of interface 9; a client that sends its
// token as a second subprotocol gets this one selected.
const wsSubprotocol = "service.v1"

// wsState is the server's WebSocket machinery (Server.ws).
type wsState struct {
	up  websocket.FastHTTPUpgrader
	cfg sessions.Config
	// ctx ends every open session at Shutdown (close 1001); wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	hdrDeprecation  = []byte("Deprecation")
	valDeprecated   = []byte("true")
	hdrWSProtocol   = []byte("Sec-WebSocket-Protocol")
	hdrWSKey        = []byte("Sec-WebSocket-Key")
	hdrWSVersion    = []byte("Sec-WebSocket-Version")
	argAccessToken  = []byte("access_token")
	argAPIKey       = []byte("api_key")
	errNotWebSocket = control.Errorf(control.EInvalidRequest, "a WebSocket handshake (version 13) is required")
	errWSEngine     = &control.Error{Code: control.EUpstreamBusy, Message: "the synthesis engine is unavailable", RetryAfter: 1}
)

// wsRoutes registers the WebSocket route (called from routes).
func (s *Server) wsRoutes(api *router.Group) {
	ctx, cancel := context.WithCancel(context.Background())
	s.ws = &wsState{
		up: websocket.FastHTTPUpgrader{
			// Small buffers: an idle session must stay within 16 KiB. Writes
			// borrow a pooled buffer per message.
			ReadBufferSize:  1024,
			WriteBufferSize: 1024,
			WriteBufferPool: &sync.Pool{},
			Subprotocols:    []string{wsSubprotocol},
			// Credentials are never cookies, so any origin may connect.
			CheckOrigin:       func(*fasthttp.RequestCtx) bool { return true },
			EnableCompression: false,
			HandshakeTimeout:  10 * time.Second,
			// Only reached when the upgrader refuses what
			// isWebSocketHandshake let through: answer in JSON too.
			Error: func(ctx *fasthttp.RequestCtx, status int, reason error) {
				code := control.EInvalidRequest
				if status >= 500 {
					code = control.EInternal
				}
				s.writeError(ctx, control.Errorf(code, "%v", reason))
			},
		},
		cfg:    sessions.Config{IdleTimeout: s.cfg.WSIdleTimeout, MaxFrame: 1 << 20},
		ctx:    ctx,
		cancel: cancel,
	}
	rt := s.newRoute("GET /stream", control.ScopeTTS, true)
	rt.tokens = true
	api.GET("/stream", func(ctx *fasthttp.RequestCtx) {
		start := reqStart(ctx)
		s.begin(ctx, rt)
		defer s.finish(ctx, rt, start)
		s.wsHandshake(ctx)
	})
}

// shutdown ends every open session with 1001 and waits for them until ctx
// ends.
func (w *wsState) shutdown(ctx context.Context) {
	if w == nil {
		return
	}
	w.cancel()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
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
	if err == nil && s.engine == nil {
		err = errWSEngine
	}
	if err == nil {
		err = s.engineReady()
	}
	if err == nil {
		err = s.checkBalance(p)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	c, cancel := context.WithTimeout(context.Background(), limitTimeout)
	lease, _, err := s.limiter.Acquire(c, p.WorkspaceID, control.SlotSession, p.Limits.Sessions)
	cancel()
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	a, err := s.admit(p, 0, true)
	setAdmissionHeaders(ctx, a, err)
	if err != nil {
		lease.Release()
		s.writeError(ctx, err)
		return
	}
	reqID := string(requestID(ctx))
	deps := sessions.Deps{
		Engine:    s.engine,
		Voice:     s.sessionVoice(p),
		Meter:     s.synth.meter,
		Workspace: workspaceOf(p),
		Logger:    s.log, // not a With per session: an idle session stays small
	}
	w := s.ws
	w.wg.Add(1)
	err = w.up.Upgrade(ctx, func(conn *websocket.Conn) {
		// Here the RequestCtx is no longer ours; the session ends before
		// this handler returns.
		opened := time.Now()
		var rerr error
		defer func() {
			// fasthttp runs this on a goroutine of its own, without a
			// recover: a panic here would end the process.
			if v := recover(); v != nil {
				rerr = fmt.Errorf("panic: %v", v)
				s.log.Error("panic in websocket session", "request_id", reqID, "panic", v, "stack", string(debug.Stack()))
			}
			a.Done(0) // the handshake charged nothing: no refund call
			lease.Release()
			w.wg.Done()
			s.log.Info("websocket session closed", "request_id", reqID, "workspace", p.WorkspaceID,
				"duration", time.Since(opened), "reason", errText(rerr))
		}()
		rerr = sessions.Run(w.ctx, conn, w.cfg, deps)
	})
	if err != nil {
		// The upgrader has answered (its checks passed ours, so this is
		// rare); nothing runs.
		w.wg.Done()
		a.Done(0)
		lease.Release()
	}
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// wsAuthenticate finds the credentials of a handshake in the order of
// interface 5.3: X-API-Key; the subprotocol list ["service.v1", token];
// access_token; the deprecated api_key query parameter, whose responses
// carry a Deprecation header. The first form present decides: a bad one is
// 401 (token_invalid for tokens), never a fall-through to the next.
func (s *Server) wsAuthenticate(ctx *fasthttp.RequestCtx) (*Principal, error) {
	var p *Principal
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
func isWebSocketHandshake(ctx *fasthttp.RequestCtx) bool {
	return websocket.FastHTTPIsWebSocketUpgrade(ctx) &&
		string(ctx.Request.Header.PeekBytes(hdrWSVersion)) == "13" &&
		len(ctx.Request.Header.PeekBytes(hdrWSKey)) > 0
}

// engineReadier is an engine that can tell it is closed or out of workers
// before a request tries it.
type engineReadier interface{ Ready() error }

// The pool is the engine the server runs; keep it answering Ready.
var _ engineReadier = (*engine.Pool)(nil)

// engineReady: 503 upstream_busy when the engine says it cannot take work.
func (s *Server) engineReady() error {
	if r, ok := s.engine.(engineReadier); ok && r.Ready() != nil {
		return errWSEngine
	}
	return nil
}

// checkBalance refuses a handshake with 402 when billing is enforced and
// nothing is left (interface 4.11), with the body a 1-character request
// would get. The handshake itself is free: admit charges it nothing.
func (s *Server) checkBalance(p *Principal) error {
	if p.Limits.Billing != control.BillingEnforce {
		return nil
	}
	ws := workspaceOf(p)
	c, cancel := context.WithTimeout(context.Background(), limitTimeout)
	defer cancel()
	left, err := s.synth.meter.Remaining(c, ws)
	if err != nil || left > 0 {
		return err
	}
	ch, _, err := s.synth.meter.Charge(c, ws, 1)
	if err == nil { // credits arrived meanwhile
		return s.synth.meter.Refund(c, ch)
	}
	return err
}

// sessionVoice resolves a task_start voice_id for p: the voice must be
// usable by the workspace, ready, and allowed by p's token.
func (s *Server) sessionVoice(p *Principal) func(context.Context, string) (*control.Voice, error) {
	return func(_ context.Context, id string) (*control.Voice, error) {
		v, err := s.usableVoice(id, p)
		if err != nil {
			return nil, err
		}
		if v.Status != control.VoiceReady {
			return nil, control.Errorf(control.EVoiceNotReady, "voice %s is not ready", id)
		}
		if p.Token != nil && len(p.Token.VoiceIDs) > 0 && !contains(p.Token.VoiceIDs, v.ID) {
			return nil, control.Errorf(control.EVoiceNotAllowed, "the access token does not allow voice %s", v.ID)
		}
		return v, nil
	}
}
