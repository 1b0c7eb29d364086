package gateway

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/internal/testutil/goroutines"
)

// Through the whole gateway an idle session holds no goroutine, with or
// without a context open, and each of them still works when its client
// comes back: the context speaks, a ping is answered, session_end closes.
// Before the poller each kept the goroutine blocked in its read.
func TestWSIdleSessionsHoldNoGoroutine(t *testing.T) {
	const n = 40
	ss := newSynthServer(t, synthOpts{})
	many := 10 * n
	w := &control.Workspace{Name: "idle", Plan: "enterprise", Sessions: &many, Concurrency: &many}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key := ss.newKey(w.ID, nil, 0, false)
	voice := ss.readyVoice(w.ID, "en")
	// One session first: the poller's goroutine and fasthttp's worker are
	// the server's, not per session.
	first, r, err := ss.wsDial("", wsKey(key))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, wsCode(r))
	}
	defer first.Close()
	ss.waitSessions(t, 1)
	base := runtime.NumGoroutine()

	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, r, err := ss.wsDial("", wsKey(key))
		if err != nil {
			t.Fatalf("dial %d: %v (%s)", i, err, wsCode(r))
		}
		defer c.Close()
		conns[i] = c
		if i%2 == 0 {
			// Half have a context open, with nothing to say yet.
			if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": "open", "voice_id": voice}); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, b, err := c.ReadMessage(); err != nil || !strings.Contains(string(b), `"task_started"`) {
				t.Fatalf("session %d: %q %v", i, b, err)
			}
		}
	}
	ss.waitSessions(t, n+1)
	// Bounded wait for the goroutines on their way out (a reader between
	// parking and returning, a writer after its last frame).
	var extra, inSessions int
	var stacks string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		extra = runtime.NumGoroutine() - base
		inSessions, stacks = goroutines.In("voicesvc/sessions.")
		if extra < n/10 && inSessions == 0 || time.Now().After(deadline) {
			break
		}
	}
	if extra >= n/10 || inSessions != 0 {
		t.Fatalf("%d idle sessions: %d more goroutines, %d in package sessions:\n%s", n, extra, inSessions, stacks)
	}

	for i, c := range conns {
		pong := make(chan string, 1)
		c.SetPongHandler(func(s string) error { pong <- s; return nil })
		if err := c.WriteControl(websocket.PingMessage, []byte("back"), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			if err := c.WriteJSON(map[string]any{"type": "task_continue", "context_id": "open",
				"text": "Back from idle.", "finalize": true}); err != nil {
				t.Fatal(err)
			}
			if evs, code := readUntil(t, c, "task_done"); code != 0 {
				t.Fatalf("session %d: close %d after %v", i, code, evs)
			}
		} else {
			speakOnce(t, c, voice, "late")
		}
		if err := c.WriteJSON(map[string]any{"type": "session_end"}); err != nil {
			t.Fatal(err)
		}
		if evs, code := readUntil(t, c, "no such frame"); code != websocket.CloseNormalClosure ||
			len(evs) == 0 || evs[len(evs)-1]["type"] != "session_ended" {
			t.Fatalf("session %d: close %d after %v", i, code, evs)
		}
		select {
		case p := <-pong:
			if p != "back" {
				t.Fatalf("session %d: pong %q", i, p)
			}
		default:
			t.Fatalf("session %d: no pong", i)
		}
	}
}
