package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// gateEngine is the reference engine whose sentences wait at a gate once
// they reach it; sentences starting with "Never" never pass.
type gateEngine struct {
	*reference.Engine
	started chan string
	open    chan struct{}
}

func newGateEngine() *gateEngine {
	return &gateEngine{Engine: reference.New(), started: make(chan string, 64), open: make(chan struct{})}
}

func (g *gateEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	g.started <- req.Text
	gate := g.open
	if strings.HasPrefix(req.Text, "Never") {
		gate = nil
	}
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Engine.Synthesize(ctx, req, emit)
}

// readUntil reads text frames until one of type typ (or the close) and
// returns the frames read and the close code (0: none yet).
func readUntil(t *testing.T, c *websocket.Conn, typ string) ([]map[string]any, int) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var evs []map[string]any
	for {
		mt, b, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return evs, ce.Code
		}
		if err != nil {
			t.Fatalf("read: %v after %v", err, evs)
		}
		if mt != websocket.TextMessage {
			continue
		}
		var ev map[string]any
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
		if ev["type"] == typ {
			return evs, 0
		}
	}
}

// expectShutdownClose reads to the close: the fatal shutting_down, 1001.
func expectShutdownClose(t *testing.T, c *websocket.Conn) []map[string]any {
	t.Helper()
	evs, code := readUntil(t, c, "")
	if n := len(evs); code != websocket.CloseGoingAway || n == 0 ||
		evs[n-1]["type"] != "error" || evs[n-1]["code"] != "shutting_down" || evs[n-1]["fatal"] != true {
		t.Fatalf("close %d after %v, want the fatal shutting_down and 1001", code, evs)
	}
	return evs
}

// Shutdown drains the sessions: an idle one ends at once; one with a
// context running may finish it (a new task_start is refused, non-fatal)
// and then ends; at the grace's end the rest end at once, their unspoken
// text refunded. Each ends with the fatal shutting_down and 1001. Before,
// every session was closed with a bare 1001 the moment shutdown began.
func TestWSShutdownDrains(t *testing.T) {
	g := newGateEngine()
	ss := newSynthServer(t, synthOpts{eng: g})
	dial := func() *websocket.Conn {
		c, r, err := ss.wsDial("", wsKey(ss.key))
		if err != nil {
			t.Fatalf("dial: %v (%s)", err, wsCode(r))
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	start := func(c *websocket.Conn, id, text string, finalize bool) {
		if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": id, "voice_id": ss.voice,
			"text": text, "finalize": finalize}); err != nil {
			t.Fatal(err)
		}
	}
	idle, finishing, cut := dial(), dial(), dial()
	start(finishing, "f", "First sentence. Second sentence.", true)
	<-g.started
	start(cut, "c", "Cut here. Never spoken. Nor this.", true)
	<-g.started
	used := ss.used(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); ss.srv.ws.shutdown(ctx) }()

	expectShutdownClose(t, idle)
	start(finishing, "new", "Too late.", true)
	evs, _ := readUntil(t, finishing, "error")
	if ev := evs[len(evs)-1]; ev["code"] != "shutting_down" || ev["fatal"] != false || ev["context_id"] != "new" {
		t.Fatalf("task_start while draining: %v", ev)
	}
	close(g.open) // both contexts run on
	evs = expectShutdownClose(t, finishing)
	done1 := 0
	for _, ev := range evs {
		if ev["type"] == "task_done" && ev["context_id"] == "f" {
			done1++
		}
	}
	if done1 != 1 {
		t.Fatalf("the running context did not finish: %v", evs)
	}
	// The grace ends while "cut" waits on its second sentence.
	if _, code := readUntil(t, cut, "sentence_done"); code != 0 {
		t.Fatalf("closed %d before its first sentence", code)
	}
	for s := range g.started {
		if strings.HasPrefix(s, "Never") {
			break
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown did not return")
	}
	expectShutdownClose(t, cut)
	// Billed: everything of "f"; of "cut" the two sentences that reached
	// the engine, not "Nor this." (9 characters, refunded); nothing of the
	// refused task_start.
	if got := ss.used(t); got != used-int64(len("Nor this.")) {
		t.Fatalf("used %d, want %d", got, used-int64(len("Nor this.")))
	}
}
