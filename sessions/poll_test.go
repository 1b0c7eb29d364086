package sessions

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"
	"voicesvc/internal/testutil/goroutines"

	"github.com/fasthttp/websocket"
	"github.com/gobwas/ws"
)

// parked waits (bounded) until session i has no reader: it read all its
// client sent and waits in the poller.
func (ts *testServer) parked(t testing.TB, i int) {
	t.Helper()
	x := ts.session(t, i)
	for deadline := time.Now().Add(10 * time.Second); !x.s.parked.Load(); {
		if time.Now().After(deadline) {
			t.Fatalf("session %d never parked", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits (bounded) for goroutines that are on their way out (the
// reader between parking and returning, the writer after its last batch)
// and returns the goroutines of this package that remain.
func settle(t testing.TB, base, limit int) (sessions, total int, stacks string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		sessions, stacks = goroutines.In("voicesvc/sessions.(*")
		total = runtime.NumGoroutine() - base
		if sessions == 0 && total < limit || time.Now().After(deadline) {
			return sessions, total, stacks
		}
		time.Sleep(time.Millisecond)
	}
}

// An idle session holds no goroutine: not one blocked in a read, nor a
// writer, also with a context open. Before the poller every session kept
// its reader's goroutine.
func TestIdleSessionsHoldNoGoroutine(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	const n = 40
	base := runtime.NumGoroutine()
	clients := make([]*client, n)
	for i := range clients {
		c := ts.dial(t)
		clients[i] = c
		if i%2 == 0 {
			// Half have a context open, with nothing to say yet.
			c.mustSend(t, start("open", "", false))
			c.until(t, isType("task_started", "open"))
		}
	}
	for i := range n {
		ts.parked(t, i)
	}
	sessions, total, stacks := settle(t, base, n/10)
	if sessions != 0 || total >= n/10 {
		t.Fatalf("%d idle sessions: %d more goroutines, %d in package sessions:\n%s", n, total, sessions, stacks)
	}
	// Every one of them still answers, and once it has spoken it is idle
	// again: the reader that waited while its context rendered parks.
	for i, c := range clients {
		if i%2 == 0 {
			c.mustSend(t, cont("open", "Now I speak.", true))
			checkDone(t, c.collect(t, isType("task_done", "open"))["open"], "Now I speak.")
		} else {
			c.mustSend(t, start("late", "Me too.", true))
			checkDone(t, c.collect(t, isType("task_done", "late"))["late"], "Me too.")
		}
	}
	for i := range n {
		ts.parked(t, i)
	}
	sessions, total, stacks = settle(t, base, n/10)
	if sessions != 0 || total >= n/10 {
		t.Fatalf("%d sessions idle again: %d more goroutines, %d in package sessions:\n%s", n, total, sessions, stacks)
	}
	for i, c := range clients {
		c.mustSend(t, `{"type":"session_end"}`)
		if code, _ := c.expectClose(t); code != websocket.CloseNormalClosure {
			t.Fatalf("session %d: close %d", i, code)
		}
	}
	ts.wait(t)
}

// A session that idled (parked, no goroutine) works as before when its
// client comes back: contexts, pings, several rounds, and its close.
func TestActiveAfterIdle(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	pongs := make(chan string, 4)
	c.ws.SetPongHandler(func(s string) error { pongs <- s; return nil })
	for round := range 3 {
		ts.parked(t, 0)
		if err := c.ws.WriteControl(websocket.PingMessage, []byte{'0' + byte(round)}, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		ts.parked(t, 0) // answered, and idle again
		id := string(rune('a' + round))
		c.mustSend(t, start(id, "Back again.", true))
		checkDone(t, c.collect(t, isType("task_done", id))[id], "Back again.")
		// The pong was queued before task_started, on the same lane.
		select {
		case got := <-pongs:
			if got != string(rune('0'+round)) {
				t.Fatalf("round %d: pong %q", round, got)
			}
		default:
			t.Fatalf("round %d: no pong", round)
		}
	}
	ts.parked(t, 0)
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "")
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.expectClose(t); code != websocket.CloseGoingAway {
		t.Fatalf("close %d, want the echo of 1001", code)
	}
	ts.wait(t)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.results[0]; err != nil {
		t.Fatalf("session: %v", err)
	}
}

// The idle timeout ends a parked session that never sent anything, and one
// whose client sent half a frame (a partial frame is not activity, as with
// the blocking reader): session_ended idle, close 1000.
func TestIdleTimeoutWhileParked(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{
			name: "nothing sent",
		},
		{
			name: "half a header",
			send: []byte{0x81},
		},
		{
			name: "half a payload",
			send: append([]byte{0x81, 0x85, 0, 0, 0, 0}, "ab"...),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{IdleTimeout: 200 * time.Millisecond}, refDeps(nil))
			c := ts.dial(t)
			if tc.send != nil {
				if _, err := c.ws.NetConn().Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			code, evs := c.expectClose(t)
			if code != websocket.CloseNormalClosure || len(evs) != 1 || evs[0].Type != "session_ended" || evs[0].Reason != "idle" {
				t.Fatalf("close %d after %+v", code, evs)
			}
			ts.wait(t)
		})
	}
}

// Revoke and Drain reach a parked session (no goroutine to wake but the
// one they start).
func TestEndParked(t *testing.T) {
	for _, tc := range []struct {
		name string
		open bool // a context is open (Drain waits for it: not here)
		end  func(*Session)
		code int
	}{
		{
			name: "revoke",
			open: true,
			end:  (*Session).Revoke,
			code: 4401,
		},
		{
			name: "drain",
			end:  (*Session).Drain,
			code: websocket.CloseGoingAway,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, Config{}, refDeps(nil))
			c := ts.dial(t)
			if tc.open {
				c.mustSend(t, start("open", "", false))
				c.until(t, isType("task_started", "open"))
			}
			ts.parked(t, 0)
			tc.end(ts.session(t, 0))
			code, evs := c.expectClose(t)
			if code != tc.code || len(evs) == 0 || !evs[len(evs)-1].Fatal {
				t.Fatalf("close %d after %+v", code, evs)
			}
			ts.wait(t)
		})
	}
}

// A protocol error (here an unmasked frame) fails the connection with 1002
// through the session's own close, after what was queued.
func TestProtocolError(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	if _, err := c.ws.NetConn().Write([]byte{0x81, 0x02, 'h', 'i'}); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.expectClose(t); code != websocket.CloseProtocolError {
		t.Fatalf("close %d, want 1002", code)
	}
	ts.wait(t)
}

// Without a poller (or a socket to watch) Serve reads on a goroutine of
// its own, and the session works the same.
func TestServeWithoutPoller(t *testing.T) {
	ln := listen(t, nil)
	defer ln.Close()
	up := &websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024}
	ended := make(chan error, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			ended <- err
			return
		}
		conn, buffered, err := upgradeRaw(up, nc)
		if err != nil {
			nc.Close()
			ended <- err
			return
		}
		New(conn, Config{}, refDeps(nil)).Serve(t.Context(), nil, buffered, func(err error) {
			conn.Close()
			ended <- err
		})
	}()
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	c := &client{ws: ws}
	c.mustSend(t, start("a", "Blocking reads.", true))
	checkDone(t, c.collect(t, isType("task_done", "a"))["a"], "Blocking reads.")
	c.mustSend(t, `{"type":"session_end"}`)
	if code, _ := c.expectClose(t); code != websocket.CloseNormalClosure {
		t.Fatalf("close %d", code)
	}
	if err := <-ended; err != nil {
		t.Fatalf("session: %v", err)
	}
}

// Run (blocking reads in a FastHTTPUpgrader handler) decodes and ends
// sessions as Serve does.
func TestRunBlocking(t *testing.T) {
	ts := startRunServer(t, Config{IdleTimeout: 300 * time.Millisecond}, refDeps(nil))
	c := ts.dial(t)
	pongs := make(chan string, 1)
	c.ws.SetPongHandler(func(s string) error { pongs <- s; return nil })
	if err := c.ws.WriteControl(websocket.PingMessage, []byte("p"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c.mustSend(t, start("a", "One sentence.", true))
	checkDone(t, c.collect(t, isType("task_done", "a"))["a"], "One sentence.")
	select {
	case got := <-pongs:
		if got != "p" {
			t.Fatalf("pong %q", got)
		}
	default:
		t.Fatal("no pong before task_started")
	}
	// Idle timeout.
	code, evs := c.expectClose(t)
	if code != websocket.CloseNormalClosure || evs[len(evs)-1].Reason != "idle" {
		t.Fatalf("close %d after %+v", code, evs)
	}
	// A client's close is echoed; an oversized message is 1009.
	c = ts.dial(t)
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "")
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.expectClose(t); code != websocket.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
	c = ts.dial(t)
	c.mustSend(t, strings.Repeat("a", 1<<20+1))
	if code, _ := c.expectClose(t); code != websocket.CloseMessageTooBig {
		t.Fatalf("close %d, want 1009", code)
	}
	ts.wait(t)
}

// A message that arrives in pieces, each written once the session has
// parked (so usually read by a reader of its own), is decoded whole: the
// half-received frame is kept while no goroutine runs.
func TestMessageInPieces(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	b, err := json.Marshal(start("split", "In pieces.", true))
	if err != nil {
		t.Fatal(err)
	}
	frame := cframe(ws.OpText, true, string(b))
	for _, piece := range [][]byte{frame[:1], frame[1:7], frame[7:20], frame[20:]} {
		ts.parked(t, 0)
		if _, err := c.ws.NetConn().Write(piece); err != nil {
			t.Fatal(err)
		}
	}
	checkDone(t, c.collect(t, isType("task_done", "split"))["split"], "In pieces.")
}
