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
	// task_started, task_cancelled) waiting to be written: a client that
	// sends without reading is closed with 1008 beyond it (64 KiB, about
	// 300 error replies or 250 full-size pongs).
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
	// Meter and Workspace bill every task_start and task_continue frame
	// per character; a nil Meter bills nothing.
	Meter     control.Meter
	Workspace *control.Workspace
	Logger    *slog.Logger
	// Observer, when set, follows every context (observe.go): the
	// server's metrics and tracing.
	Observer ContextObserver
}

// session is everything one socket holds. It is kept small: an idle session
// is this struct, the connection and the goroutine blocked in Run.
type session struct {
	conn   *websocket.Conn
	cfg    Config
	deps   Deps
	parent context.Context // Run's ctx: runner contexts derive from it
	log    *slog.Logger

	mu sync.Mutex // guards everything below and the tasks' shared fields
	outq
	tasks      []*task // open contexts
	draining   []*task // finished contexts whose task_done is still queued
	busy       int     // running runners
	lastActive time.Time
	// aborting, once set, ends the session: the read loop is woken by a
	// past read deadline and ends it so.
	aborting   *disconnect
	abortFrame *frame
	stopping   bool             // no new runners, no more frames
	overflowed bool             // the replies' cap was hit: no more frames are queued
	winding    bool             // the server is shutting down: end once no context is open
	refunds    []control.Charge // owed, made by flushRefunds outside the lock
	readFailed bool             // the websocket.Conn refuses further reads (read loop only)
	peerClosed bool             // the client's close frame was read (read loop only)
	wg         sync.WaitGroup
}

// Run serves one session on conn: New(conn, cfg, deps).Run(ctx).
func Run(ctx context.Context, conn *websocket.Conn, cfg Config, deps Deps) error {
	return New(conn, cfg, deps).Run(ctx)
}

// Session is one realtime session, as the server holds it: it can end it
// from outside (Revoke, Drain) while Run serves it. A Session is small and
// holds no goroutine or timer of its own for this: the server keeps one
// registry for all of them.
type Session struct{ s *session }

// New prepares a session on conn; Run serves it.
func New(conn *websocket.Conn, cfg Config, deps Deps) *Session {
	s := &session{conn: conn, cfg: cfg.withDefaults(), deps: deps, log: deps.Logger}
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
	x.s.abort(disconnectUnauthorized, errorFrame(control.EUnauthorized, "the API key of this session was revoked or has expired", true))
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
	if s.winding && !s.stopping {
		s.abortLocked(disconnectShutdown, shuttingDownFrame())
	}
}

func shuttingDownFrame() *frame {
	return errorFrame(control.EShuttingDown, "the server is shutting down", true)
}

func errorFrame(code, msg string, fatal bool) *frame {
	f := getFrame()
	f.hdr = appendError(f.hdr, "", code, msg, fatal)
	return f
}

// Run serves the session until the client ends it, it idles out, a fatal
// error occurs, Revoke or Drain ends it, or ctx is cancelled (the server's
// grace period is over: fatal error shutting_down, close 1001). conn must
// stay usable until Run returns (with FastHTTPUpgrader: call it inside the
// upgrade handler); Run does not close it. It returns only when every
// goroutine it started has stopped and every refund is made. The returned
// error describes why it ended; it is for logging, Run has already told
// the client. Run is called once.
func (x *Session) Run(ctx context.Context) error {
	s := x.s
	s.mu.Lock()
	s.parent = ctx
	s.mu.Unlock()
	conn := s.conn
	// The writer writes to the socket directly (writeBatch), so nothing
	// else may write while it can run. The library's read limit would
	// write its own 1009 close from the read loop: the limit is enforced
	// by readLoop instead. Its default ping and close handlers would write
	// a pong or the close echo from the read loop: pongs go through the
	// writer, and finish echoes the close once the writer has stopped.
	conn.SetReadLimit(0)
	conn.SetPingHandler(s.onPing)
	conn.SetCloseHandler(s.onClose)
	// Compression is off at the upgrader; this keeps it off for writes
	// even if a gateway enables negotiation (the writer never compresses).
	conn.EnableWriteCompression(false)
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, func() { s.abort(disconnectShutdown, shuttingDownFrame()) })
		defer stop()
	}
	s.mu.Lock()
	s.lastActive = time.Now()
	s.setDeadlineLocked()
	s.mu.Unlock()
	return s.readLoop()
}

// readLoop is Run's goroutine: it reads and dispatches client messages and
// decides how the session ends.
func (s *session) readLoop() error {
	for {
		typ, r, err := s.conn.NextReader()
		if err != nil {
			return s.endOnReadError(err)
		}
		buf := getReadBuf()
		_, err = buf.ReadFrom(io.LimitReader(r, s.cfg.MaxFrame+1))
		if err != nil {
			putReadBuf(buf)
			return s.endOnReadError(err)
		}
		if int64(buf.Len()) > s.cfg.MaxFrame {
			putReadBuf(buf)
			return s.finish(disconnectTooBig, nil, websocket.ErrReadLimit)
		}
		s.mu.Lock()
		s.lastActive = time.Now()
		s.setDeadlineLocked()
		s.mu.Unlock()
		if typ != websocket.TextMessage {
			putReadBuf(buf)
			s.reject(invalid("", "binary messages are not accepted"))
			continue
		}
		// fasthttp/websocket does not check UTF-8 (RFC 6455 8.1).
		if !utf8.Valid(buf.Bytes()) {
			putReadBuf(buf)
			return s.finish(disconnectInvalidUTF8, nil, errors.New("sessions: text frame is not UTF-8"))
		}
		end, err := s.handle(buf.Bytes())
		putReadBuf(buf)
		if end {
			return err
		}
	}
}

// endOnReadError tells apart the ways a read ends: a wake-up by abort, the
// idle deadline, a length past any limit, or the client going away.
func (s *session) endOnReadError(err error) error {
	s.readFailed = true
	s.mu.Lock()
	d, f := s.aborting, s.abortFrame
	s.abortFrame = nil
	s.mu.Unlock()
	var ne net.Error
	switch {
	case d == disconnectBroken:
		return s.finish(d, nil, errors.New("sessions: write to client failed"))
	case d != nil:
		return s.finish(d, f, errors.New("sessions: aborted"))
	case errors.Is(err, websocket.ErrReadLimit):
		// A frame length that overflows the library's counter.
		return s.finish(disconnectTooBig, nil, err)
	case errors.As(err, &ne) && ne.Timeout():
		f := getFrame()
		f.hdr = appendSessionEnded(f.hdr, "idle")
		return s.finish(disconnectNormal, f, nil)
	}
	var ce *websocket.CloseError
	if errors.As(err, &ce) && s.peerClosed {
		// Echo the client's close (what the library's default handler
		// does), after the writer has stopped. (A CloseError without a
		// close frame is the library's 1006 for a truncated read.)
		return s.finish(echo(ce.Code), nil, nil)
	}
	if errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return s.finish(disconnectGone, nil, nil)
	}
	return s.finish(disconnectGone, nil, err)
}

// onPing answers a client's ping through the writer (the library's default
// handler would write the pong itself, racing the writer). It runs in the
// read loop; a session that is stopping answers no more pings.
func (s *session) onPing(data string) error {
	f := getFrame()
	f.kind = kindPong
	f.hdr = append(f.hdr, data...)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
	return nil
}

// onClose notes the client's close frame instead of echoing it at once:
// finish echoes it once the writer has stopped. It runs in the read loop.
func (s *session) onClose(int, string) error {
	s.peerClosed = true
	return nil
}

// handle runs dispatch on a goroutine of its own and waits for it. The
// read loop's goroutine is what an idle session keeps, and a goroutine's
// stack never shrinks below what its idle call chain needs plus the growth
// it once had: JSON decoding, the meter's store and logging would leave
// every idle session with an 8-32 KiB stack instead of 4 KiB.
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
	m, typ, merr := parseMessage(b)
	if merr != nil {
		s.reject(merr)
		return false, nil
	}
	switch typ {
	case "task_start":
		return s.taskStart(&m)
	case "task_continue":
		return s.taskContinue(&m)
	case "task_cancel":
		s.taskCancel(&m)
		return false, nil
	case "session_end":
		f := getFrame()
		f.hdr = appendSessionEnded(f.hdr, "client_request")
		return true, s.finish(disconnectNormal, f, nil)
	}
	s.reject(invalid("", "unknown message type %q", typ))
	return false, nil
}

// reject answers a non-fatal error frame.
func (s *session) reject(e *msgError) {
	f := getFrame()
	f.hdr = appendError(f.hdr, e.contextID, e.code, e.msg, false)
	s.mu.Lock()
	s.pushLocked(f, true)
	s.mu.Unlock()
}

// fatal ends the session with an error frame and a close code.
func (s *session) fatal(contextID, code, msg string, d *disconnect, cause error) error {
	f := getFrame()
	f.hdr = appendError(f.hdr, contextID, code, msg, true)
	return s.finish(d, f, cause)
}

// abort asks the read loop to end the session from another goroutine (a
// runner, the writer, server shutdown). The first reason wins.
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
// read loop for an abort, none while synthesis runs (a session that is
// talking is not idle), otherwise IdleTimeout after the last activity.
func (s *session) setDeadlineLocked() {
	var d time.Time
	switch {
	case s.aborting != nil:
		d = time.Unix(1, 0)
	case s.busy > 0:
	default:
		d = s.lastActive.Add(s.cfg.IdleTimeout)
	}
	_ = s.conn.SetReadDeadline(d)
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

	// From here on no writer runs or can start (stopping is set), so the
	// close frame below is the last thing written and cannot interleave.
	s.waitWriter()
	if d.code != 0 && !broken {
		msg := websocket.FormatCloseMessage(d.code, "")
		if err := s.conn.WriteControl(websocket.CloseMessage, msg, time.Now().Add(s.cfg.WriteTimeout)); err != nil {
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
// can destroy the close frame before the client reads it.
func (s *session) drain() {
	nc := s.conn.NetConn()
	if nc == nil {
		return
	}
	_ = nc.SetReadDeadline(time.Now().Add(s.cfg.CloseGrace))
	for !s.readFailed {
		_, _, err := s.conn.NextReader()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return // the close handshake is complete
		}
		if err != nil {
			break
		}
	}
	// After a read error the websocket.Conn refuses to read; take what is
	// still on the wire (the rest of an oversized frame, or the backlog of
	// a client that sent without reading) from the socket. The goroutine
	// ends after this, so a larger buffer costs no idle session anything.
	var b [8 << 10]byte
	for {
		if _, err := nc.Read(b[:]); err != nil {
			return
		}
	}
}

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
