package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/gobwas/ws"

	"voicesvc/control"
	"voicesvc/netpoll"
	"voicesvc/synth"
)

// TestReadFirstMessage: the first data message is found whole behind
// control frames, across fragments and however the bytes are split
// between the handshake's buffer and the socket; every byte read comes
// back, still masked, for the session; the protocol's breaches, the frame
// bound and the size limit are errors.
func TestReadFirstMessage(t *testing.T) {
	msg := `{"text":" ","xi_api_key":"vsk_x"}`
	next := cframe(ws.OpText, true, `{"text":"next"}`)
	var pings [][]byte
	for range maxFramesBefore {
		pings = append(pings, cframe(ws.OpPing, true, ""))
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    string
		wantErr error
	}{
		{"one text frame", cframe(ws.OpText, true, msg), msg, nil},
		{"binary", cframe(ws.OpBinary, true, msg), msg, nil},
		{"the next message behind it", cat(cframe(ws.OpText, true, msg), next), msg, nil},
		{"ping and pong first", cat(cframe(ws.OpPing, true, "p"), cframe(ws.OpPong, true, ""),
			cframe(ws.OpText, true, msg)), msg, nil},
		{"fragments with a ping between", cat(cframe(ws.OpText, false, msg[:5]), cframe(ws.OpPing, true, ""),
			cframe(ws.OpContinuation, false, msg[5:9]), cframe(ws.OpContinuation, true, msg[9:])), msg, nil},
		{"empty", cframe(ws.OpText, true, ""), "", nil},
		{"as many frames before it as allowed", cat(cat(pings...), cframe(ws.OpText, true, msg)), msg, nil},
		{"one frame too many", cat(cat(pings...), cframe(ws.OpText, false, ""), cframe(ws.OpContinuation, true, msg)),
			"", errTooManyFrames},
		{"close first", cframe(ws.OpClose, true, closeBody(1000, "")), "", errClientClosed},
		{"too big", cframe(ws.OpText, true, runes(101)), "", errFirstMessageTooBig},
		{"too big in fragments", cat(cframe(ws.OpText, false, runes(60)), cframe(ws.OpContinuation, true, runes(41))),
			"", errFirstMessageTooBig},
		{"unmasked", ws.MustCompileFrame(ws.NewTextFrame([]byte(msg))), "", ws.ErrProtocolMaskRequired},
		{"continuation first", cframe(ws.OpContinuation, true, msg), "", ws.ErrProtocolContinuationUnexpected},
		{"a new message inside fragments", cat(cframe(ws.OpText, false, msg[:5]), cframe(ws.OpText, true, msg[5:])),
			"", ws.ErrProtocolContinuationExpected},
		{"cut short", cframe(ws.OpText, true, msg)[:10], "", io.EOF},
		{"nothing", nil, "", io.EOF},
	} {
		for _, split := range []int{0, 1, 7, len(tc.in)} {
			if split > len(tc.in) {
				continue
			}
			in := bytes.Clone(tc.in)
			got, all, err := readFirstMessage(bytes.NewReader(in[split:]), in[:split], 100)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s (split %d): error %v, want %v", tc.name, split, err, tc.wantErr)
				continue
			}
			if !bytes.Equal(in, tc.in) {
				t.Errorf("%s (split %d): the input was changed (unmasked in place?)", tc.name, split)
			}
			if err != nil {
				continue
			}
			if string(got) != tc.want {
				t.Errorf("%s (split %d): message %q, want %q", tc.name, split, got, tc.want)
			}
			// Every byte read is handed on, in order and as sent: a prefix
			// of the input that holds the whole first message.
			if !bytes.HasPrefix(tc.in, all) || len(all) < len(tc.in)-len(next) {
				t.Errorf("%s (split %d): %d bytes handed on of %d", tc.name, split, len(all), len(tc.in))
			}
		}
	}
}

// FuzzReadFirstMessage: any bytes, split anywhere, end in a message or an
// error, never a panic; a message is within the limit, and what comes back
// is what was read, as it was sent. Seeds: testdata/fuzz (fragments with a
// ping between, a header announcing 2^63 bytes, a close, an oversized
// message, a ping flood).
func FuzzReadFirstMessage(f *testing.F) {
	f.Add(cframe(ws.OpText, true, `{"xi_api_key":"k"}`), 3)
	f.Fuzz(func(t *testing.T, in []byte, split int) {
		if split < 0 || split > len(in) {
			split = 0
		}
		orig := bytes.Clone(in)
		msg, all, err := readFirstMessage(bytes.NewReader(in[split:]), in[:split], 1<<10)
		if !bytes.Equal(in, orig) {
			t.Fatal("the input was changed")
		}
		if err != nil {
			return
		}
		if len(msg) > 1<<10 || !bytes.HasPrefix(orig, all) {
			t.Fatalf("message of %d bytes, %d bytes handed on", len(msg), len(all))
		}
	})
}

// refusalWire is a protocol's error shape for the refusals (the native
// one's would do; this one tells the test which code and message came).
type refusalWire struct{ native }

func (refusalWire) AppendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	m, _ := json.Marshal(map[string]any{"refused": code, "message": msg, "fatal": fatal, "context": contextID})
	return append(b, m...)
}

// acceptServer upgrades each connection, accepts its first message with fm
// (admit's answer for the principal), and serves the session admitted so
// with every byte read as its buffered bytes.
func acceptServer(t *testing.T, fm *FirstMessage, timeout time.Duration,
	admit func(*control.Principal) (*synth.Admission, error)) (addr string, shutdown context.CancelFunc) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := netpoll.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				conn, buffered, err := upgradeRaw(&websocket.Upgrader{}, c)
				if err != nil {
					c.Close()
					return
				}
				_, _, all, err := fm.Accept(ctx, conn, buffered, timeout, admit)
				if err != nil {
					conn.Close()
					return
				}
				New(conn, Config{}, refDeps(nil)).Serve(ctx, p, all, func(error) { conn.Close() })
			}()
		}
	}()
	t.Cleanup(func() { cancel(); ln.Close(); <-done; p.Close() })
	return ln.Addr().String(), cancel
}

// keyAuth is a FirstMessage.Auth: the principal of {"key":"good"}.
func keyAuth(msg []byte) (*control.Principal, error) {
	var m struct{ Key string }
	if json.Unmarshal(msg, &m) != nil || m.Key != "good" {
		return nil, control.Errorf(control.EUnauthorized, "no key")
	}
	return &control.Principal{WorkspaceID: "ws"}, nil
}

// TestAcceptServes: a first message with its credential, after a ping, is
// admitted, and the session decodes it itself: it opens a context and
// speaks its text, and the ping is answered.
func TestAcceptServes(t *testing.T) {
	fm := &FirstMessage{Auth: keyAuth}
	var admitted atomic.Int32
	addr, _ := acceptServer(t, fm, 0, func(p *control.Principal) (*synth.Admission, error) {
		admitted.Add(1)
		return nil, nil
	})
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pong := make(chan string, 1)
	ws.SetPongHandler(func(s string) error { pong <- s; return nil })
	ws.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second))
	c := &client{ws: ws}
	c.mustSend(t, start("a", "Spoken by the first message.", true, "key", "good"))
	tr := c.collect(t, isType("task_done", "a"))
	if tr["a"] == nil || len(tr["a"].chunks) == 0 || tr["a"].end.Type != "task_done" || admitted.Load() != 1 {
		t.Fatalf("context a: %+v, admitted %d times", tr["a"], admitted.Load())
	}
	select {
	case p := <-pong:
		if p != "hi" {
			t.Errorf("pong %q", p)
		}
	default:
		t.Error("the ping before the first message was not answered")
	}
}

// TestAcceptRefuses: each refusal is one error message in the Wire's shape
// (fatal, no context), then its close code (docs/dialects.md#elevenlabs,
// "Credentials in the first message"); a breach of the protocol is a close
// 1002 alone; nothing is admitted after a refusal of the credential.
func TestAcceptRefuses(t *testing.T) {
	fm := &FirstMessage{Auth: keyAuth, Wire: refusalWire{}}
	var mu sync.Mutex // the server's goroutines admit
	var admitErr error
	admitted := 0
	addr, shutdown := acceptServer(t, fm, 300*time.Millisecond, func(*control.Principal) (*synth.Admission, error) {
		mu.Lock()
		defer mu.Unlock()
		admitted++
		return nil, admitErr
	})
	for _, tc := range []struct {
		name     string
		first    []byte // nil: nothing sent
		admitErr error
		refused  string // "": no error message
		close    int
		admitted int
	}{
		{"bad key", cframe(ws.OpText, true, `{"key":"bad"}`), nil, control.EUnauthorized, 4401, 0},
		{"not JSON", cframe(ws.OpText, true, `hello`), nil, control.EUnauthorized, 4401, 0},
		{"no first message in time", nil, nil, control.EUnauthorized, 4401, 0},
		{"too many sessions", cframe(ws.OpText, true, `{"key":"good"}`),
			control.Errorf(control.ETooManySessions, "too many sessions"), control.ETooManySessions, websocket.ClosePolicyViolation, 1},
		{"scope", cframe(ws.OpText, true, `{"key":"good"}`),
			control.Errorf(control.EInsufficientScope, "scope"), control.EInsufficientScope, websocket.ClosePolicyViolation, 1},
		{"engine unavailable", cframe(ws.OpText, true, `{"key":"good"}`),
			control.Errorf(control.EUpstreamBusy, ""), control.EUpstreamBusy, websocket.CloseTryAgainLater, 1},
		{"store unavailable", cframe(ws.OpText, true, `{"key":"good"}`),
			errors.New("the store is down"), control.EInternal, websocket.CloseTryAgainLater, 1},
		{"too big", cframe(ws.OpText, true, runes(MaxFirstMessage+1)), nil, control.EPayloadTooLarge, websocket.CloseMessageTooBig, 0},
		{"unmasked", ws.MustCompileFrame(ws.NewTextFrame([]byte(`{"key":"good"}`))), nil, "", websocket.CloseProtocolError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			admitErr, admitted = tc.admitErr, 0
			mu.Unlock()
			raw, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			conn, _, err := websocket.NewClient(raw, mustURL(addr), nil, 1024, 1024)
			if err != nil {
				t.Fatal(err)
			}
			if tc.first != nil {
				raw.Write(tc.first) // raw: the unmasked frame, and no wait for a big one's refusal
			}
			code, msg := readRefusal(t, conn)
			if code != tc.close || msg["refused"] != tcRefused(tc.refused) {
				t.Errorf("close %d after %v, want %d after %q", code, msg, tc.close, tc.refused)
			}
			if tc.refused != "" && (msg["fatal"] != true || msg["context"] != "" || msg["message"] == "") {
				t.Errorf("refusal %v: want fatal, no context, a message", msg)
			}
			mu.Lock()
			defer mu.Unlock()
			if admitted != tc.admitted {
				t.Errorf("admitted %d times, want %d", admitted, tc.admitted)
			}
		})
	}
	t.Run("shutdown", func(t *testing.T) {
		conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		shutdown()
		if code, msg := readRefusal(t, conn); code != websocket.CloseGoingAway || msg["refused"] != control.EShuttingDown {
			t.Errorf("close %d after %v", code, msg)
		}
	})
}

func tcRefused(code string) any {
	if code == "" {
		return nil
	}
	return code
}

func mustURL(addr string) *url.URL { return &url.URL{Scheme: "ws", Host: addr, Path: "/"} }

// readRefusal reads what a refused socket gets: at most one text message
// (nil when none), then the close; it returns the close code.
func readRefusal(t *testing.T, c *websocket.Conn) (int, map[string]any) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var msg map[string]any
	for i := 0; ; i++ {
		_, b, err := c.ReadMessage()
		var ce *websocket.CloseError
		switch {
		case errors.As(err, &ce):
			return ce.Code, msg
		case err != nil:
			t.Fatalf("no close: %v", err)
		case i > 0:
			t.Fatalf("a second message %s", b)
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatalf("refusal %q: %v", b, err)
		}
		if strings.Contains(string(b), "good") {
			t.Errorf("the refusal repeats the credential: %s", b)
		}
	}
}
