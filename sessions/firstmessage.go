package sessions

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/gobwas/ws"

	"voicesvc/control"
	"voicesvc/synth"
)

// FirstMessage is how a protocol's socket authenticates by its first
// message instead of its handshake (ElevenLabs' stream-input sockets:
// "xi_api_key", or "authorization": "Bearer <token>";
// docs/dialects.md#elevenlabs). The host upgrades a handshake that carried
// no credential (its route's Auth error wraps ErrNoCredentials) without
// admitting anything, and Accept reads the client's first data message,
// within MaxFirstMessage bytes and the first-message timeout (5 s; pings
// and pongs before it are allowed, and answered once the session runs).
// Auth finds the principal in it; the host's admit checks the route's
// scope and the request rate and admits the session exactly as at a
// handshake (engine, balance, session slot, streaming feature, stream
// slot, token: synth.Service.AdmitSession). The session is then served
// with every byte read as its buffered bytes, so it decodes the first
// message itself, as if it had come right behind the handshake.
//
// A refusal (no or bad credential, scope, rate, plan limits, balance) is
// one error message in the Wire's shape (fatal, no context), then a close:
// 4401 for credentials (missing, invalid, expired: the close a revoked
// session gets), 1008 (policy) for every other refusal, 1009 for a first
// message over MaxFirstMessage, 1013 when the service cannot admit now,
// 1001 at shutdown. Nothing is admitted or billed then, and a socket
// whose first message never comes is closed the same way (4401) once the
// timeout passes. A client that breaks the WebSocket protocol gets a close
// 1002 alone, one that closes or goes away nothing.
type FirstMessage struct {
	// Auth finds the principal of the first message's payload (text or
	// binary, at most MaxFirstMessage bytes; untrusted). It uses the
	// host's AuthKey or AuthToken, as the route's handshake Auth does.
	Auth func(msg []byte) (*control.Principal, error)
	// Wire writes the refusal: its AppendError, fatal, without a context
	// (nil: the native protocol's).
	Wire Wire
}

// MaxFirstMessage bounds the first message of a FirstMessage socket: it
// carries a credential and the opening of a context, not a long text.
const MaxFirstMessage = 64 << 10

// DefaultFirstMessageTimeout is the wait for the first message when Accept
// is given none.
const DefaultFirstMessageTimeout = 5 * time.Second

// ErrNoCredentials, wrapped by a route's handshake Auth error (as a
// control.Error's Cause), says that the request carried no credential in
// any form the route takes: on a FirstMessage route a WebSocket handshake
// then goes on unauthenticated; everywhere else the error is answered as
// it is.
var ErrNoCredentials = errors.New("sessions: no credentials in the request")

// maxFramesBefore bounds the frames (pings, pongs, fragments) read until
// the first message is whole, so empty frames cannot keep the reader busy.
const maxFramesBefore = 64

// Refusal writes: bounded for a client that does not read. Lingering
// after a refusal: what the client still sends is read and dropped, for
// at most lingerTime and lingerBytes, until it closes too.
const (
	refusalWriteTimeout = 2 * time.Second
	lingerTime          = time.Second
	lingerBytes         = 1 << 20
)

var (
	errFirstMessageMissing = control.Errorf(control.EUnauthorized,
		"no credentials: send them with the handshake or in the first message")
	errFirstMessageTooBig = control.Errorf(control.EPayloadTooLarge,
		"the first message is over %d bytes", MaxFirstMessage)
	errFirstShuttingDown = control.Errorf(control.EShuttingDown, "the server is shutting down")
	// errClientClosed: the client closed (or sent a close frame) before
	// its first message; nothing is owed to it.
	errClientClosed  = errors.New("sessions: the client closed before its first message")
	errTooManyFrames = ws.ProtocolError("too many frames before the first message")
)

// Accept reads conn's first message (buffered: the client's bytes already
// read with its handshake), finds its principal by fm.Auth and lets admit
// admit it; all is then every byte read, buffered included, for Serve.
// ctx ending (the server's shutdown) cuts the wait short; timeout 0 is
// DefaultFirstMessageTimeout. A refusal is answered (see FirstMessage)
// and returned; the caller closes conn either way once done with it.
func (fm *FirstMessage) Accept(ctx context.Context, conn *websocket.Conn, buffered []byte, timeout time.Duration,
	admit func(*control.Principal) (*synth.Admission, error)) (p *control.Principal, a *synth.Admission, all []byte, err error) {
	if p, a, all, err = fm.accept(ctx, conn.NetConn(), buffered, timeout, admit); err != nil && fm.refuse(conn, err) {
		linger(conn.NetConn())
	}
	return p, a, all, err
}

func (fm *FirstMessage) accept(ctx context.Context, raw net.Conn, buffered []byte, timeout time.Duration,
	admit func(*control.Principal) (*synth.Admission, error)) (p *control.Principal, a *synth.Admission, all []byte, err error) {
	defer func() {
		// The host's goroutine has no recover (fasthttp's hijack
		// handler): a panic in Auth is a refusal, not the process's end.
		if v := recover(); v != nil {
			p, a, all, err = nil, nil, nil, fmt.Errorf("sessions: panic reading the first message: %v", v)
		}
	}()
	if timeout <= 0 {
		timeout = DefaultFirstMessageTimeout
	}
	if err = raw.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return nil, nil, nil, err
	}
	// Shutdown's end cuts the wait short, as it ends the sessions (after
	// the timeout's deadline, which would otherwise undo it).
	stop := context.AfterFunc(ctx, func() { raw.SetReadDeadline(time.Unix(1, 0)) })
	msg, all, err := readFirstMessage(raw, buffered, MaxFirstMessage)
	stopped := stop() // false: shutdown's deadline is set, or about to be
	if err == nil && stopped {
		err = raw.SetReadDeadline(time.Time{}) // the session keeps its own
	}
	var ne net.Error
	switch {
	case err == nil && stopped:
	case !stopped || ctx.Err() != nil:
		return nil, nil, nil, errFirstShuttingDown
	case errors.As(err, &ne) && ne.Timeout():
		return nil, nil, nil, errFirstMessageMissing
	default:
		return nil, nil, nil, err
	}
	if p, err = fm.Auth(msg); err != nil {
		return nil, nil, nil, err
	}
	if a, err = admit(p); err != nil {
		return nil, nil, nil, err
	}
	return p, a, all, nil
}

// readFirstMessage decodes the client's frames, pre first (bytes read with
// its handshake) then r, with the session's decoder (inbound), until its
// first data message is whole, and returns that message's payload
// (unmasked, a copy) and every byte read, pre included and still masked:
// the session decodes them again, the first message and any control frame
// before it (it answers the pings then). Bytes read past the message (the
// client's next ones, at most one read's worth) are in all too. A payload
// over limit is errFirstMessageTooBig as soon as a header announces it; a
// close frame is errClientClosed; more than maxFramesBefore frames, or a
// breach of the protocol, a ws.ProtocolError.
func readFirstMessage(r io.Reader, pre []byte, limit int) (msg, all []byte, err error) {
	in := getInbound()
	defer putInbound(in)
	all = bytes.Clone(pre)
	var work [4 << 10]byte
	for fed := 0; ; {
		for fed < len(all) {
			// A copy: next unmasks in place, and the session must get
			// the bytes as they were sent.
			k := copy(work[:], all[fed:])
			n, ev, err := in.next(work[:k], int64(limit))
			switch {
			case errors.Is(err, errTooBig):
				return nil, nil, errFirstMessageTooBig
			case err != nil:
				return nil, nil, err
			case in.frames > maxFramesBefore+1: // the message's last frame is not before it
				return nil, nil, errTooManyFrames
			case ev.kind == evMessage:
				return bytes.Clone(ev.data), all, nil
			case ev.kind == evClose:
				return nil, nil, errClientClosed
			}
			fed += n
		}
		all = slices.Grow(all, len(work))
		n, err := r.Read(all[len(all):cap(all)])
		all = all[:len(all)+n]
		if n == 0 && err != nil {
			return nil, nil, err // io.EOF: the client went away
		}
	}
}

// refuse answers a refused first message: the protocol's error message,
// then a close (FirstMessage's codes). It reports whether the client got
// them (false: it left, or was owed nothing but the close).
func (fm *FirstMessage) refuse(conn *websocket.Conn, err error) (answered bool) {
	deadline := time.Now().Add(refusalWriteTimeout)
	var pe ws.ProtocolError
	switch {
	case errors.Is(err, errClientClosed) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed):
		return false
	case errors.As(err, &pe):
		return conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseProtocolError, ""), deadline) == nil
	}
	ce := control.AsError(err)
	code := websocket.ClosePolicyViolation
	switch ce.Code {
	case control.EUnauthorized, control.EKeyExpired, control.ETokenInvalid:
		code = disconnectUnauthorized.code
	case control.EPayloadTooLarge:
		code = websocket.CloseMessageTooBig
	case control.EShuttingDown:
		code = websocket.CloseGoingAway
	case control.EInternal, control.EStoreUnavailable, control.EUnavailable, control.EUpstreamBusy:
		code = websocket.CloseTryAgainLater
	}
	msg := ce.Message
	if msg == "" {
		msg = strings.ReplaceAll(ce.Code, "_", " ")
	}
	w := fm.Wire
	if w == nil {
		w = native{}
	}
	conn.SetWriteDeadline(deadline)
	if conn.WriteMessage(websocket.TextMessage, w.AppendError(nil, "", ce.Code, msg, true)) != nil {
		return false
	}
	return conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, ce.Code), deadline) == nil
}

// linger reads and drops what the client sends after its refusal, until
// it closes (its answer to the close frame) or the bounds pass. Closing a
// socket with unread input resets it, and a client still writing its
// first message (one over the size limit) would lose the refusal.
func linger(raw net.Conn) {
	if raw.SetReadDeadline(time.Now().Add(lingerTime)) == nil {
		io.Copy(io.Discard, io.LimitReader(raw, lingerBytes))
	}
}
