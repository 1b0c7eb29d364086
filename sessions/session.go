package sessions

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/websocket"
	"github.com/gobwas/ws"

	"voicesvc/control"
	"voicesvc/engine"
)

// Config holds the session limits; zero fields take the defaults.
type Config struct {
	MaxContexts    int           // open contexts per session (4)
	IdleTimeout    time.Duration // no client message and no synthesis (600 s)
	MaxFrame       int64         // largest client message (1 MiB, close 1009)
	MaxPendingText int           // characters waiting in one context (100,000)
	WriteTimeout   time.Duration // one frame to the client (10 s)
	IdleFlush      time.Duration // default idle_flush_ms (800 ms)
	// MaxQueued bounds the outbound queue in bytes: a client that reads
	// slower than synthesis pauses its engine work here (256 KiB).
	MaxQueued int
	// MaxReplies bounds the replies to client messages (pongs, errors,
	// task_started, task_cancelled) waiting to be written (64 KiB, about
	// 300 error replies or 250 full-size pongs): beyond it the client's
	// next messages wait to be read (replies.go); one whose socket takes
	// nothing for half the WriteTimeout meanwhile is closed with 1008.
	MaxReplies int
	// CloseGrace is how long Run waits for the client's close frame after
	// sending its own (1 s).
	CloseGrace time.Duration
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.MaxContexts <= 0 {
		c.MaxContexts = 4
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = 1 << 20
	}
	if c.MaxPendingText <= 0 {
		c.MaxPendingText = 100_000
	}
	if c.MaxQueued <= 0 {
		c.MaxQueued = 256 << 10
	}
	if c.MaxReplies <= 0 {
		c.MaxReplies = 64 << 10
	}
	def(&c.IdleTimeout, 600*time.Second)
	def(&c.WriteTimeout, 10*time.Second)
	def(&c.IdleFlush, 800*time.Millisecond)
	def(&c.CloseGrace, time.Second)
	return c
}

// Deps are what a session uses from the rest of the service.
type Deps struct {
	// Engine synthesizes one sentence per call (normally the engine pool).
	Engine engine.Engine
	// Engines renders each context with its voice's engine (the built-in
	// one, or an upstream the voice names); nil: Engine alone.
	Engines *engine.Registry
	// Voice resolves a task_start voice_id for this session's credentials:
	// *control.Error ENotFound or EVoiceNotReady -> voice_not_found,
	// EVoiceNotAllowed -> voice_not_allowed (both non-fatal); any other
	// error ends the session with 1011.
	Voice func(ctx context.Context, voiceID string) (*control.Voice, error)
	// Billing bills every task_start and task_continue frame per
	// character, and refunds the text that never reached the engine: the
	// core's admission of the session (synth.Admission); nil bills nothing.
	Billing Billing
	Logger  *slog.Logger
	// Observer, when set, follows every context (observe.go): the
	// server's metrics and tracing.
	Observer ContextObserver
	// Wire is the protocol's messages (wire.go); nil: the native one.
	Wire Wire
}

// Billing is the core's billing of a session's text as it arrives.
type Billing interface {
	// Charge bills chars characters; in enforce mode a charge that is not
	// covered is refused whole (EQuotaExhausted, EInsufficientCredits).
	Charge(ctx context.Context, chars int64) (control.Charge, error)
	// Refund gives back a charge whose text never reached the engine.
	Refund(ctx context.Context, c control.Charge) error
}

// session is everything one socket holds. It is kept small: an idle session
// served by Serve is this struct, the connection, a timer and its entry in
// the poller; no goroutine and no buffer.
type session struct {
	conn   Transport // writes the close frames
	nc     net.Conn  // the transport's bytes: read and written directly
	cfg    Config
	deps   Deps
	wire   Wire
	parent context.Context // Run's ctx: runner contexts derive from it
	log    *slog.Logger

	mu sync.Mutex // guards everything below but the reader's own, and the tasks' shared fields
	outq
	tasks      []*task // open contexts
	draining   []*task // finished contexts whose task_done is still queued
	busy       int     // running runners
	lastActive time.Time
	// aborting, once set, ends the session: the reader is woken (a past
	// read deadline, or poll.go's wake) and ends it so.
	aborting   *disconnect
	abortFrame *frame
	stopping   bool             // no new runners, no more frames
	overflowed bool             // the replies' cap was hit: no more frames are queued
	winding    bool             // the server is shutting down: end once no context is open
	closing    bool             // the client asked to end once no context is open (EndSession Graceful)
	refunds    []control.Charge // owed, made by flushRefunds outside the lock
	wg         sync.WaitGroup

	// The reader's own: only the goroutine reading the socket uses them.
	in         *inbound    // the frame or message half received; nil between messages
	readFailed bool        // the byte stream cannot be decoded any more
	peerClosed bool        // the client's close frame was read
	stopCtx    func() bool // unregisters the abort on Run's ctx

	cmds []Command // Parse's, reused message to message

	polled // Serve's state (poll.go)
}

// Run serves one session on conn: New(conn, cfg, deps).Run(ctx).
func Run(ctx context.Context, conn *websocket.Conn, cfg Config, deps Deps) error {
	return New(conn, cfg, deps).Run(ctx)
}

// Transport is what a session is served over (the way centrifuge splits a
// client from its transport): a byte stream that carries WebSocket frames,
// which the session reads and writes itself (frames.go, writer.go), and
// the close frame that ends it. WebSocket adapts the server's upgraded
// connection; tests serve sessions over an in-memory pipe (transport_test.go).
type Transport interface {
	// Conn is the byte stream: the session reads frames from it, writes
	// them to it, and sets its deadlines. A Conn that is also a
	// syscall.Conn is watched by the poller while the session is idle.
	Conn() net.Conn
	// WriteClose writes the close frame with code, before deadline.
	WriteClose(code int, deadline time.Time) error
}

// WebSocket is the Transport of an upgraded connection. The session reads
// and writes conn.NetConn() directly (conn must hold no bytes read ahead
// of the handshake); the Conn only writes the close frame, uncompressed.
func WebSocket(conn *websocket.Conn) Transport {
	// Compression is off at the upgrader; this keeps it off even if a
	// server enables negotiation (the writer never compresses).
	conn.EnableWriteCompression(false)
	return wsTransport{conn}
}

type wsTransport struct{ c *websocket.Conn }

func (t wsTransport) Conn() net.Conn { return t.c.NetConn() }

func (t wsTransport) WriteClose(code int, deadline time.Time) error {
	return t.c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ""), deadline)
}

// Session is one realtime session, as the server holds it: it can end it
// from outside (Revoke, Drain) while Run or Serve serves it. A Session
// holds no goroutine or timer of its own for this: the server keeps one
// registry for all of them.
type Session struct{ s *session }

// New prepares a session on an upgraded connection; Run or Serve serves it.
func New(conn *websocket.Conn, cfg Config, deps Deps) *Session {
	return NewOver(WebSocket(conn), cfg, deps)
}

// NewOver prepares a session over any Transport.
func NewOver(t Transport, cfg Config, deps Deps) *Session {
	s := &session{conn: t, nc: t.Conn(), cfg: cfg.withDefaults(), deps: deps, wire: deps.Wire, log: deps.Logger}
	if s.wire == nil {
		s.wire = native{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.outq.init(&s.mu)
	return &Session{s: s}
}

// Revoke ends the session because its credentials were revoked or expired:
// a fatal error unauthorized, its contexts cancelled (their unspoken text
// refunded), close 4401. No synthesis starts and nothing is charged once
// it is called. It may be called from any goroutine, before, during or
// after Run.
func (x *Session) Revoke() {
	x.s.abort(disconnectUnauthorized, x.s.errorFrame(control.EUnauthorized, "the API key of this session was revoked or has expired", true))
}

// Drain starts a graceful shutdown: a session with no open context ends at
// once, the others end as soon as their last context ends; a task_start is
// refused meanwhile (non-fatal error shutting_down). Each ends with a fatal
// error shutting_down and close 1001. Cancelling Run's ctx ends the
// session at once in the same way.
func (x *Session) Drain() {
	s := x.s
	s.mu.Lock()
	s.winding = true
	if len(s.tasks) == 0 {
		s.lastContextClosedLocked()
	}
	s.mu.Unlock()
}

// lastContextClosedLocked ends a draining session once nothing is open.
func (s *session) lastContextClosedLocked() {
	switch {
	case s.stopping:
	case s.winding:
		s.abortLocked(disconnectShutdown, s.shuttingDownFrame())
	case s.closing:
		s.abortLocked(disconnectNormal, s.sessionEndedFrame("client_request"))
	}
}

func (s *session) shuttingDownFrame() *frame {
	return s.errorFrame(control.EShuttingDown, "the server is shutting down", true)
}

func (s *session) errorFrame(code, msg string, fatal bool) *frame {
	f := getFrame()
	f.hdr = s.wire.AppendError(f.hdr, "", code, msg, fatal)
	return f
}

// sessionEndedFrame is the protocol's last message of a session that ends
// normally, or nil.
func (s *session) sessionEndedFrame(reason string) *frame {
	f := getFrame()
	if f.hdr = s.wire.AppendSessionEnded(f.hdr, reason); len(f.hdr) == 0 {
		putFrame(f)
		return nil
	}
	return f
}

// Run serves the session until the client ends it, it idles out, a fatal
// error occurs, Revoke or Drain ends it, or ctx is cancelled (the server's
// grace period is over: fatal error shutting_down, close 1001), reading
// the socket on the calling goroutine. Serve does the same without a
// goroutine while the session is idle.
//
// The session reads frames from conn.NetConn() itself, not through the
// Conn, so the Conn must hold no bytes read ahead of the handshake (the
// Upgrader's and FastHTTPUpgrader's Conns do not: the former wraps the
// socket to return such bytes first; for the latter the socket is
// fasthttp's, which does). conn must stay usable until Run returns (with
// FastHTTPUpgrader: call it inside the upgrade handler); Run does not
// close it. It returns only when every goroutine it started has stopped
// and every refund is made. The returned error describes why it ended; it
// is for logging, Run has already told the client. Run (or Serve) is
// called once.
func (x *Session) Run(ctx context.Context) error {
	s := x.s
	s.begin(ctx)
	return s.readLoop(nil)
}

// begin readies the session to be served under ctx.
func (s *session) begin(ctx context.Context) {
	s.mu.Lock()
	s.parent = ctx
	s.mu.Unlock()
	// The writer writes to the transport directly (writeBatch) and the
	// session reads it directly (consume): WriteClose only writes the
	// session's close frame, after the writer has stopped.
	if ctx.Done() != nil {
		s.stopCtx = context.AfterFunc(ctx, func() { s.abort(disconnectShutdown, s.shuttingDownFrame()) })
	}
	s.mu.Lock()
	f := getFrame()
	if f.hdr = s.wire.Hello(f.hdr); len(f.hdr) > 0 {
		s.pushLocked(f, true) // the protocol's first message
	} else {
		putFrame(f)
	}
	s.lastActive = time.Now()
	s.setDeadlineLocked()
	s.mu.Unlock()
}

// runReadSize is the buffer Run reads into.
const runReadSize = 1 << 10

// readLoop is Run's goroutine: it reads the socket, blocking, and hands
// what arrives to consume until the session ends.
func (s *session) readLoop(buffered []byte) error {
	if end, err := s.consume(buffered); end {
		return err
	}
	// The buffer is held while the goroutine waits: small, as the
	// Conn's reader was (a message of any size is decoded piece by piece).
	b := make([]byte, runReadSize)
	for {
		n, err := s.nc.Read(b)
		if n > 0 {
			if end, err := s.consume(b[:n]); end {
				return err
			}
		}
		if err != nil {
			return s.endOnReadError(err)
		}
	}
}

// consume decodes the client's bytes p and handles every message and
// control frame they complete; what is left of an incomplete one stays in
// s.in for the next bytes. end reports that the session is over (err is
// then Run's result). Only the goroutine reading the socket calls it.
func (s *session) consume(p []byte) (end bool, err error) {
	for len(p) > 0 {
		if s.in == nil {
			s.in = getInbound()
		}
		n, ev, perr := s.in.next(p, s.cfg.MaxFrame)
		p = p[n:]
		if perr != nil {
			s.readFailed = true
			if errors.Is(perr, errTooBig) {
				return true, s.finish(disconnectTooBig, nil, perr)
			}
			return true, s.finish(disconnectProtocol, nil, perr)
		}
		switch ev.kind {
		case evPing:
			s.onPing(ev.data)
		case evClose:
			// Echo the client's close (RFC 6455 5.5.1) once the writer
			// has stopped; after it the close handshake is complete.
			s.peerClosed = true
			return true, s.finish(echo(ev.code), nil, nil)
		case evMessage:
			end, err := s.message(ev.op, ev.data)
			s.in.release()
			if end {
				return true, err
			}
		}
	}
	if s.in != nil && s.in.idle() {
		putInbound(s.in) // between messages a session holds no decoder
		s.in = nil
	}
	return false, nil
}

// message handles one whole client message.
func (s *session) message(op ws.OpCode, b []byte) (end bool, err error) {
	s.mu.Lock()
	if s.aborting != nil {
		// Messages that were read with it are not handled.
		s.mu.Unlock()
		return true, s.endAborted()
	}
	s.lastActive = time.Now()
	s.setDeadlineLocked()
	s.mu.Unlock()
	if op != ws.OpText {
		s.reject(Invalid("", "binary messages are not accepted"))
		return false, nil
	}
	// RFC 6455 8.1: a text message is UTF-8.
	if !utf8.Valid(b) {
		return true, s.finish(disconnectInvalidUTF8, nil, errors.New("sessions: text frame is not UTF-8"))
	}
	return s.handle(b)
}

// endOnReadError tells apart the ways a read ends: a wake-up by abort, the
// idle deadline, or the client going away.
func (s *session) endOnReadError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		// A deadline, not a failure: the decoder lost nothing.
		if s.aborted() {
			return s.endAborted()
		}
		return s.endIdle()
	}
	s.readFailed = true
	if s.aborted() {
		return s.endAborted()
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.finish(disconnectGone, nil, nil)
	}
	return s.finish(disconnectGone, nil, err)
}

// aborted reports that abort was called.
func (s *session) aborted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.aborting != nil
}

// endAborted ends the session as abort asked.
func (s *session) endAborted() error {
	s.mu.Lock()
	d, f := s.aborting, s.abortFrame
	s.abortFrame = nil
	s.mu.Unlock()
	if d == disconnectBroken {
		return s.finish(d, nil, errors.New("sessions: write to client failed"))
	}
	return s.finish(d, f, errors.New("sessions: aborted"))
}

// endIdle ends a session that idled out.
func (s *session) endIdle() error {
	return s.finish(disconnectNormal, s.sessionEndedFrame("idle"), nil)
}

// onPing answers a client's ping through the writer, which owns every
// write while the session runs. A session that is stopping answers no more
// pings.
func (s *session) onPing(data []byte) {
	f := getFrame()
	f.kind = kindPong
	f.hdr = append(f.hdr, data...)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
}

// handle runs dispatch on a goroutine of its own and waits for it. For
// Run: its goroutine is what an idle session keeps, and a goroutine's
// stack never shrinks below what its idle call chain needs plus the growth
// it once had (JSON decoding, the meter's store and logging would leave
// every idle session with an 8-32 KiB stack instead of 4 KiB). For Serve,
// whose reader ends once the socket is drained, measured: dispatching on
// the reader itself made time to first audio with 32 sessions at full load
// go from about 3 to 8 ms at the median, and cancel from 6 to 11 ms
// (BenchmarkFirstAudio, BenchmarkCancelLatency rtf=0 and flood).
func (s *session) handle(b []byte) (end bool, err error) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		end, err = s.dispatch(b)
	}()
	<-done
	return end, err
}

// dispatch handles one message; end reports that the session is over.
func (s *session) dispatch(b []byte) (end bool, err error) {
	cmds, perr := s.wire.Parse(b, s.cmds[:0])
	if perr != nil {
		s.reject(asRefusal("", perr))
		return false, nil
	}
	for i := range cmds {
		if end, err = s.command(&cmds[i]); end {
			break
		}
	}
	clear(cmds) // (no text or params kept past the message)
	s.cmds = cmds[:0]
	return end, err
}

// reject answers a non-fatal error message.
func (s *session) reject(e *Refusal) {
	f := getFrame()
	f.hdr = s.wire.AppendError(f.hdr, e.Context, e.Code, e.Message, false)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
}

// fatal ends the session with an error message and a close code.
func (s *session) fatal(contextID, code, msg string, d *disconnect, cause error) error {
	f := getFrame()
	f.hdr = s.wire.AppendError(f.hdr, contextID, code, msg, true)
	return s.finish(d, f, cause)
}

// abort asks the reader to end the session from another goroutine (a
// runner, the writer, server shutdown, Revoke, Drain). The first reason
// wins.
func (s *session) abort(d *disconnect, f *frame) {
	s.mu.Lock()
	s.abortLocked(d, f)
	s.mu.Unlock()
}

func (s *session) abortLocked(d *disconnect, f *frame) {
	if s.aborting != nil || s.stopping {
		if f != nil {
			putFrame(f)
		}
		return
	}
	s.aborting, s.abortFrame = d, f
	s.setDeadlineLocked()
}

// setDeadlineLocked keeps the read deadline right: in the past to wake the
// reader for an abort, none while synthesis runs (a session that is
// talking is not idle), otherwise IdleTimeout after the last activity.
// A polled session has no read to wake: its idle timer and wake do the
// same (poll.go).
func (s *session) setDeadlineLocked() {
	if s.poller != nil {
		s.pollDeadlineLocked()
		return
	}
	var d time.Time
	switch {
	case s.aborting != nil:
		d = time.Unix(1, 0)
	case s.busy > 0:
	default:
		d = s.lastActive.Add(s.cfg.IdleTimeout)
	}
	_ = s.nc.SetReadDeadline(d)
}

// finish ends the session: stops every context, sends last (if any) after
// what is already queued for the client, closes as d says, waits for the
// client's close and for every goroutine.
func (s *session) finish(d *disconnect, last *frame, cause error) error {
	s.mu.Lock()
	for len(s.tasks) > 0 {
		if s.tasks[0].outcome == "" {
			s.tasks[0].outcome = outcomeSessionEnded
		}
		s.tasks[0].cancelLocked()
	}
	if last != nil {
		// Behind task_done and task_failed frames already queued: nothing
		// may follow session_ended or a fatal error.
		s.pushLocked(last, false)
	}
	s.stopping = true
	broken := s.broken
	s.mu.Unlock()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	s.stopPolling() // the reader is this goroutine until the end

	// From here on no writer runs or can start (stopping is set), so the
	// close frame below is the last thing written and cannot interleave.
	s.waitWriter()
	if d.code != 0 && !broken {
		if err := s.conn.WriteClose(d.code, time.Now().Add(s.cfg.WriteTimeout)); err != nil {
			broken = true
		}
	}
	// After echoing the client's close the handshake is complete.
	if !broken && d.code != 0 && !s.peerClosed {
		s.drain()
	}
	s.wg.Wait()
	s.flushRefunds()
	if cause != nil {
		s.log.Debug("websocket session ended", "close", d.code, "reason", d.reason, "err", cause)
	}
	return cause
}

// drain reads until the client answers the close frame or CloseGrace
// passes: closing with unread input makes the kernel send a reset, which
// can destroy the close frame before the client reads it. Once the byte
// stream cannot be decoded (the rest of an oversized message, a protocol
// error) it is read and dropped.
func (s *session) drain() {
	_ = s.nc.SetReadDeadline(time.Now().Add(s.cfg.CloseGrace))
	b := getSockBuf()
	defer putSockBuf(b)
	for {
		n, err := s.nc.Read(b[:])
		if n > 0 && !s.readFailed && s.drained(b[:n]) {
			return // the close handshake is complete
		}
		if err != nil {
			return
		}
	}
}

// drained decodes what the client sent after the server's close, dropping
// its messages, and reports whether its close frame came.
func (s *session) drained(p []byte) bool {
	for len(p) > 0 {
		if s.in == nil {
			s.in = getInbound()
		}
		n, ev, err := s.in.next(p, s.cfg.MaxFrame)
		p = p[n:]
		switch {
		case err != nil:
			s.readFailed = true
			return false
		case ev.kind == evClose:
			return true
		case ev.kind == evMessage:
			s.in.release()
		}
	}
	return false
}

// sockBuf is what one read from the socket takes. It is pooled and held
// only while the socket is read, so an idle session holds none.
type sockBuf [16 << 10]byte

var sockBufs = sync.Pool{New: func() any { return new(sockBuf) }}

func getSockBuf() *sockBuf { return sockBufs.Get().(*sockBuf) }

func putSockBuf(b *sockBuf) { sockBufs.Put(b) }

// readBufs are shared by all sessions so that an idle session holds none.
var readBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getReadBuf() *bytes.Buffer { return readBufs.Get().(*bytes.Buffer) }

func putReadBuf(b *bytes.Buffer) {
	if b.Cap() > 64<<10 {
		return
	}
	b.Reset()
	readBufs.Put(b)
}
