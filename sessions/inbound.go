package sessions

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/gobwas/ws"
)

// inbound decodes the client's frames (RFC 6455 5) from bytes as they
// arrive, in any pieces: it is fed what one read returned, and keeps
// between reads only the frame or message that is incomplete. That is what
// lets a session read its socket only when the socket has input (poll.go)
// instead of keeping a goroutine blocked in a frame reader: the
// fasthttp/websocket Conn reads through a bufio.Reader of its own, whose
// buffered bytes cannot be seen, and a read deadline that fires breaks it
// for good, so it cannot be asked "is a message there?". The header
// parsing, the protocol checks and the unmasking are github.com/gobwas/ws's;
// the Conn still does the handshake and the session's close frames.
//
// An inbound holds no buffer of its own: a message's payload goes into a
// pooled buffer taken at its first data frame and given back after it is
// handled, and the inbound itself is pooled by its session between
// messages (idle sessions hold none).
type inbound struct {
	hdr  [ws.MaxHeaderSize]byte // the header being gathered
	nhdr int
	in   bool      // h is the current frame's header; left payload bytes to come
	h    ws.Header // (h.Length is what is left, decremented as it arrives)
	off  int       // payload bytes of the current frame already read, for the mask
	ctl  [ws.MaxControlFramePayloadSize]byte
	nctl int
	op   ws.OpCode     // the message being received: OpText or OpBinary; 0: none
	msg  *bytes.Buffer // its payload so far (readBufs)
	hr   bytes.Reader  // over hdr, for ws.ReadHeaderBuffer
	tmp  [ws.MaxHeaderSize - 2]byte
	// frames counts the frames begun since reset, which the first-message
	// reader bounds (firstmessage.go).
	frames int
}

// eventKind is what next found.
type eventKind uint8

const (
	evNone    eventKind = iota // all input taken, nothing complete yet
	evMessage                  // a whole text or binary message
	evPing
	evPong
	evClose
)

// inEvent is a complete message or control frame. data is valid until the
// next call to next (a message's until release).
type inEvent struct {
	kind eventKind
	op   ws.OpCode // evMessage: ws.OpText or ws.OpBinary
	data []byte    // the message, the ping's or pong's payload, the close's reason
	code int       // evClose: the status code; 1005 for none
}

// Errors that end a session: errTooBig with 1009, the others with 1002.
var (
	errTooBig     = errors.New("sessions: message over the size limit")
	errCloseFrame = ws.ProtocolError("invalid close frame")
)

// next decodes p until it completes one event or runs out, and returns how
// many bytes of p it took. max bounds a message's payload (errTooBig as
// soon as a frame header announces more). After an error the inbound must
// not be used again (the connection is failed).
//
// Client frames are always masked; next unmasks data in place, in p.
func (in *inbound) next(p []byte, max int64) (n int, ev inEvent, err error) {
	for n < len(p) {
		if !in.in {
			k, done := in.gatherHeader(p[n:])
			n += k
			if !done {
				return n, ev, nil
			}
			if err := in.startFrame(max); err != nil {
				return n, ev, err
			}
		}
		// Payload.
		k := int(min(in.h.Length, int64(len(p)-n)))
		chunk := p[n : n+k]
		ws.Cipher(chunk, in.h.Mask, in.off)
		n += k
		in.off += k
		in.h.Length -= int64(k)
		if in.h.OpCode.IsControl() {
			in.nctl += copy(in.ctl[in.nctl:], chunk)
		} else {
			in.msg.Write(chunk)
		}
		if in.h.Length > 0 {
			return n, ev, nil // the rest of the frame is still to come
		}
		in.in = false
		if ev, err = in.endFrame(); err != nil || ev.kind != evNone {
			return n, ev, err
		}
	}
	return n, ev, nil
}

// gatherHeader takes header bytes from p until the header is whole (done).
func (in *inbound) gatherHeader(p []byte) (n int, done bool) {
	for n < len(p) {
		need := 2
		if in.nhdr >= 2 {
			need = headerSize(in.hdr[0], in.hdr[1])
		}
		if in.nhdr == need {
			break
		}
		k := copy(in.hdr[in.nhdr:need], p[n:])
		in.nhdr += k
		n += k
	}
	return n, in.nhdr >= 2 && in.nhdr == headerSize(in.hdr[0], in.hdr[1])
}

// headerSize is a header's length from its first two bytes.
func headerSize(_, b1 byte) int {
	n := 2
	if b1&0x80 != 0 {
		n += 4
	}
	switch b1 & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	return n
}

// startFrame parses and checks the gathered header.
func (in *inbound) startFrame(max int64) error {
	in.hr.Reset(in.hdr[:in.nhdr])
	h, err := ws.ReadHeaderBuffer(&in.hr, in.tmp[:0])
	in.nhdr = 0
	if err != nil {
		return ws.ProtocolError(err.Error()) // a length with its top bit set
	}
	state := ws.StateServerSide
	if in.op != 0 {
		state = state.Set(ws.StateFragmented)
	}
	if err := ws.CheckHeader(h, state); err != nil {
		return err
	}
	if !h.OpCode.IsControl() {
		have := int64(0)
		if in.msg != nil {
			have = int64(in.msg.Len())
		}
		if h.Length > max-have {
			return errTooBig
		}
		if in.op == 0 {
			in.op = h.OpCode
			in.msg = getReadBuf()
		}
	}
	in.h, in.in, in.off, in.nctl = h, true, 0, 0
	in.frames++
	return nil
}

// endFrame reports what a frame just completed makes.
func (in *inbound) endFrame() (inEvent, error) {
	switch in.h.OpCode {
	case ws.OpPing:
		return inEvent{kind: evPing, data: in.ctl[:in.nctl]}, nil
	case ws.OpPong:
		return inEvent{kind: evPong, data: in.ctl[:in.nctl]}, nil
	case ws.OpClose:
		return parseClose(in.ctl[:in.nctl])
	}
	if !in.h.Fin {
		return inEvent{}, nil
	}
	return inEvent{kind: evMessage, op: in.op, data: in.msg.Bytes()}, nil
}

// release gives back the buffer of the message next returned; call it once
// the message is handled.
func (in *inbound) release() {
	if in.msg != nil {
		putReadBuf(in.msg)
		in.msg = nil
	}
	in.op = 0
}

// idle reports that nothing is half received: the inbound can go back to
// its pool.
func (in *inbound) idle() bool { return !in.in && in.nhdr == 0 && in.op == 0 }

// reset makes the inbound ready for another connection.
func (in *inbound) reset() {
	in.release()
	in.nhdr, in.in, in.nctl, in.frames = 0, false, 0, 0
}

// parseClose checks a close frame's payload (RFC 6455 5.5.1, 7.4): none,
// or a status code a peer may send followed by a UTF-8 reason.
func parseClose(p []byte) (inEvent, error) {
	switch {
	case len(p) == 0:
		return inEvent{kind: evClose, code: 1005}, nil // no status code
	case len(p) == 1:
		return inEvent{}, errCloseFrame
	}
	code := int(binary.BigEndian.Uint16(p))
	if !validCloseCode(code) || !utf8.Valid(p[2:]) {
		return inEvent{}, errCloseFrame
	}
	return inEvent{kind: evClose, code: code, data: p[2:]}, nil
}

// validCloseCode: the codes a peer may send (RFC 6455 7.4.1 and IANA's
// registry: 1004-1006 and 1015 never appear in a frame), as
// fasthttp/websocket accepted them before.
func validCloseCode(code int) bool {
	switch {
	case code >= 1000 && code <= 1003, code >= 1007 && code <= 1014:
		return true
	}
	return code >= 3000 && code <= 4999
}

// inbounds are shared by all sessions.
var inbounds = sync.Pool{New: func() any { return new(inbound) }}

func getInbound() *inbound { return inbounds.Get().(*inbound) }

func putInbound(in *inbound) {
	in.reset()
	inbounds.Put(in)
}
