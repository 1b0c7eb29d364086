package sessions

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gobwas/ws"
)

// cframe is a client frame: masked with a fixed non-zero key.
func cframe(op ws.OpCode, fin bool, p string) []byte {
	f := ws.MaskFrameWith(ws.NewFrame(op, fin, []byte(p)), [4]byte{0x12, 0x34, 0x56, 0x78})
	return ws.MustCompileFrame(f)
}

func closeBody(code int, reason string) string {
	return string(binary.BigEndian.AppendUint16(nil, uint16(code))) + reason
}

// decoded is what decoding an input gave: its events, copied, and the
// error that ended it.
type decoded struct {
	events []string
	err    error
}

func (d decoded) String() string { return fmt.Sprintf("%q err=%v", d.events, d.err) }

// decode feeds input to one inbound in pieces of size step (0: whole) as
// consume would, and records what it finds.
func decode(input []byte, step int, max int64) decoded {
	p := bytes.Clone(input) // next unmasks in place
	in := getInbound()
	defer putInbound(in)
	var d decoded
	for len(p) > 0 {
		k := len(p)
		if step > 0 && step < k {
			k = step
		}
		chunk := p[:k]
		p = p[k:]
		for len(chunk) > 0 {
			n, ev, err := in.next(chunk, max)
			if n == 0 && err == nil && ev.kind == evNone {
				panic("next made no progress")
			}
			chunk = chunk[n:]
			if err != nil {
				d.err = err
				return d
			}
			switch ev.kind {
			case evMessage:
				d.events = append(d.events, fmt.Sprintf("msg %d %s", ev.op, ev.data))
				in.release()
			case evPing:
				d.events = append(d.events, fmt.Sprintf("ping %s", ev.data))
			case evPong:
				d.events = append(d.events, fmt.Sprintf("pong %s", ev.data))
			case evClose:
				d.events = append(d.events, fmt.Sprintf("close %d %s", ev.code, ev.data))
			}
		}
	}
	return d
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// The decoder gives the same events however the bytes are cut, and fails
// the connection as RFC 6455 says.
func TestInbound(t *testing.T) {
	long := strings.Repeat("x", 300)   // 16-bit length
	huge := strings.Repeat("y", 70000) // 64-bit length
	for _, tc := range []struct {
		name  string
		input []byte
		max   int64
		want  []string
		err   error // nil, errTooBig, errCloseFrame or any ws.ProtocolError (protocol)
	}{
		{
			name:  "text",
			input: cframe(ws.OpText, true, `{"type":"x"}`),
			want:  []string{`msg 1 {"type":"x"}`},
		},
		{
			name:  "empty text and binary",
			input: cat(cframe(ws.OpText, true, ""), cframe(ws.OpBinary, true, "\x00\x01")),
			want:  []string{"msg 1 ", "msg 2 \x00\x01"},
		},
		{
			name:  "lengths",
			input: cat(cframe(ws.OpText, true, long), cframe(ws.OpText, true, huge)),
			want:  []string{"msg 1 " + long, "msg 1 " + huge},
		},
		{
			name: "fragmented with control frames between",
			input: cat(cframe(ws.OpText, false, "ab"), cframe(ws.OpPing, true, "p"),
				cframe(ws.OpContinuation, false, ""), cframe(ws.OpPong, true, ""),
				cframe(ws.OpContinuation, true, "cd"), cframe(ws.OpText, true, "e")),
			want: []string{"ping p", "pong ", "msg 1 abcd", "msg 1 e"},
		},
		{
			name:  "close with code and reason",
			input: cframe(ws.OpClose, true, closeBody(1001, "bye")),
			want:  []string{"close 1001 bye"},
		},
		{
			name:  "close without code",
			input: cframe(ws.OpClose, true, ""),
			want:  []string{"close 1005 "},
		},
		{
			name:  "close with a private code",
			input: cframe(ws.OpClose, true, closeBody(4000, "")),
			want:  []string{"close 4000 "},
		},
		{
			name:  "at the limit",
			input: cat(cframe(ws.OpText, false, "12345"), cframe(ws.OpContinuation, true, "67890")),
			max:   10,
			want:  []string{"msg 1 1234567890"},
		},
		{
			name:  "over the limit in one frame",
			input: cframe(ws.OpText, true, "12345678901"),
			max:   10,
			err:   errTooBig,
		},
		{
			name:  "over the limit across fragments",
			input: cat(cframe(ws.OpText, false, "123456"), cframe(ws.OpContinuation, true, "78901")),
			max:   10,
			err:   errTooBig,
		},
		{
			name:  "announced length far over the limit",
			input: []byte{0x81, 0xff, 0x00, 0x00, 0x00, 0x10, 0, 0, 0, 0, 1, 2, 3, 4},
			max:   1 << 20,
			err:   errTooBig,
		},
		{
			name:  "length with its top bit set",
			input: []byte{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4},
			err:   ws.ProtocolError(""),
		},
		{
			name:  "unmasked",
			input: ws.MustCompileFrame(ws.NewTextFrame([]byte("hi"))),
			err:   ws.ErrProtocolMaskRequired,
		},
		{
			name:  "reserved bits",
			input: append([]byte{0xc1, 0x80}, 0, 0, 0, 0),
			err:   ws.ErrProtocolNonZeroRsv,
		},
		{
			name:  "reserved opcode",
			input: cframe(ws.OpCode(0x3), true, ""),
			err:   ws.ErrProtocolOpCodeReserved,
		},
		{
			name:  "fragmented control frame",
			input: cframe(ws.OpPing, false, ""),
			err:   ws.ErrProtocolControlNotFinal,
		},
		{
			name:  "control frame over 125 bytes",
			input: cframe(ws.OpPing, true, long),
			err:   ws.ErrProtocolControlPayloadOverflow,
		},
		{
			name:  "continuation without a start",
			input: cframe(ws.OpContinuation, true, "x"),
			err:   ws.ErrProtocolContinuationUnexpected,
		},
		{
			name:  "new message inside a fragmented one",
			input: cat(cframe(ws.OpText, false, "a"), cframe(ws.OpText, true, "b")),
			err:   ws.ErrProtocolContinuationExpected,
		},
		{
			name:  "close of one byte",
			input: cframe(ws.OpClose, true, "\x03"),
			err:   errCloseFrame,
		},
		{
			name:  "close with a code no peer sends",
			input: cframe(ws.OpClose, true, closeBody(1005, "")),
			err:   errCloseFrame,
		},
		{
			name:  "close with a reason that is not UTF-8",
			input: cframe(ws.OpClose, true, closeBody(1000, "\xff")),
			err:   errCloseFrame,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			whole := decode(tc.input, 0, max)
			if !sameError(whole.err, tc.err) || (tc.err == nil && !equalStrings(whole.events, tc.want)) {
				t.Fatalf("got %v, want %q err=%v", whole, tc.want, tc.err)
			}
			for _, step := range []int{1, 2, 3, 7, 13} {
				if got := decode(tc.input, step, max); !sameDecoded(got, whole) {
					t.Fatalf("in pieces of %d: %v, whole: %v", step, got, whole)
				}
			}
		})
	}
}

// sameError: both nil, or the same sentinel, or both protocol errors when
// want is the empty ProtocolError.
func sameError(got, want error) bool {
	var pe ws.ProtocolError
	switch {
	case want == nil || got == nil:
		return got == want
	case want == ws.ProtocolError(""):
		return errors.As(got, &pe)
	}
	return errors.Is(got, want)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// sameDecoded: the same events and the same error.
func sameDecoded(a, b decoded) bool {
	return a.err == b.err && equalStrings(a.events, b.events)
}

// The decoder never panics, never makes a message over the limit or a
// control payload over 125 bytes, reports only close codes a peer may
// send, and decodes the same events however its input is cut.
func FuzzInbound(f *testing.F) {
	f.Add(cframe(ws.OpText, true, `{"type":"session_end"}`), uint8(0))
	f.Add(cat(cframe(ws.OpText, false, "ab"), cframe(ws.OpPing, true, "p"), cframe(ws.OpContinuation, true, "cd")), uint8(2))
	f.Add(cframe(ws.OpClose, true, closeBody(1000, "ok")), uint8(1))
	f.Add(cframe(ws.OpClose, true, "\x03"), uint8(3))
	f.Add(cframe(ws.OpBinary, true, strings.Repeat("z", 200)), uint8(5))
	f.Add([]byte{0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4}, uint8(0))
	f.Add([]byte{0x81, 0xfe, 0x00, 0x7e, 1, 2, 3, 4}, uint8(1))
	f.Add(ws.MustCompileFrame(ws.NewTextFrame([]byte("unmasked"))), uint8(0))
	const max = 100
	f.Fuzz(func(t *testing.T, input []byte, step uint8) {
		whole := decode(input, 0, max)
		for _, ev := range whole.events {
			kind, rest, _ := strings.Cut(ev, " ")
			switch kind {
			case "msg":
				if len(rest)-2 > max { // "1 " or "2 " before the payload
					t.Fatalf("message of %d bytes over %d", len(rest)-2, max)
				}
			case "ping", "pong":
				if len(rest) > ws.MaxControlFramePayloadSize {
					t.Fatalf("%s of %d bytes", kind, len(rest))
				}
			case "close":
				var code int
				fmt.Sscanf(rest, "%d", &code)
				if code != 1005 && !validCloseCode(code) {
					t.Fatalf("close code %d", code)
				}
			}
		}
		if got := decode(input, int(step)+1, max); !sameDecoded(got, whole) {
			t.Fatalf("in pieces of %d: %v, whole: %v", int(step)+1, got, whole)
		}
	})
}
