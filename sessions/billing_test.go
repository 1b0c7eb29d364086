package sessions

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fasthttp/websocket"
	"github.com/jackc/pgx/v5"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/sqlite"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// storeKinds are the stores billing runs on: SQLite always, Postgres when
// VOICESVC_TEST_PG names a database.
var storeKinds = []string{"sqlite", "postgres"}

// openBillingStore opens a fresh store of that kind.
func openBillingStore(t *testing.T, kind string) control.Store {
	t.Helper()
	if kind == "sqlite" {
		db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "voicesvc.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	dsn := os.Getenv("VOICESVC_TEST_PG")
	if dsn == "" {
		t.Skip("VOICESVC_TEST_PG is unset")
	}
	schema := "t_" + control.NewID()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	db, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		db.Close()
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	})
	return db
}

// billedWorkspace is an enforcing workspace with no allowance and these
// credits, and the meter over its store.
func billedWorkspace(t *testing.T, kind string, credits int64) (control.Meter, *control.Workspace) {
	t.Helper()
	db := openBillingStore(t, kind)
	zero := int64(0)
	ws := &control.Workspace{Name: "w", Plan: "free", Billing: control.BillingEnforce, Allowance: &zero}
	if err := db.CreateWorkspace(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	ws, err := db.UpdateWorkspace(t.Context(), ws.ID, control.WorkspaceUpdate{Credits: &credits})
	if err != nil {
		t.Fatal(err)
	}
	return control.NewMeter(db, control.BillingEnforce), ws
}

// gated renders through the reference engine, but each sentence waits at
// the gate once it has reached the engine, so that a test knows exactly
// which sentences started.
type gated struct {
	*reference.Engine
	started chan string   // each sentence as it reaches the engine
	open    chan struct{} // closed: sentences go through
	fail    bool          // sentences fail instead, once through
}

func newGated() *gated {
	return &gated{Engine: reference.New(), started: make(chan string, 64), open: make(chan struct{})}
}

func (g *gated) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	g.started <- req.Text
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	if g.fail {
		return engine.ErrInvalidInput
	}
	return g.Engine.Synthesize(ctx, req, emit)
}

// sync sends a message the server rejects and waits for the rejection:
// the server reads in order, so every earlier frame has been handled.
func (c *client) sync(t testing.TB) {
	t.Helper()
	c.mustSend(t, `{"type":"sync"}`)
	c.until(t, func(ev event) bool { return ev.Type == "error" && strings.Contains(ev.Message, "sync") })
}

// Whatever ends a context, what stays billed is the characters of the
// sentences whose synthesis started: here one sentence of 7 characters
// ("Abcde. ") out of the ten sent, on both stores. Before, every character
// charged stayed charged (the fatal close of the credit case kept 96
// characters of a session that had spoken nothing).
func TestBilledIsWhatStarted(t *testing.T) {
	const sentence, frames, credits = "Abcde. ", 10, 1000
	type ending struct {
		name  string
		fail  bool                                          // the engine fails the started sentence
		end   func(t *testing.T, ts *testServer, c *client) // ends the context
		close int                                           // the close code the client gets (0: the test closes)
		code  string                                        // the fatal error before it
	}
	endings := []ending{
		{name: "cancel", end: func(t *testing.T, ts *testServer, c *client) {
			c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": "a"})
			c.until(t, isType("task_cancelled", "a"))
		}},
		{name: "session_end", close: websocket.CloseNormalClosure, end: func(t *testing.T, ts *testServer, c *client) {
			c.mustSend(t, map[string]any{"type": "session_end"})
		}},
		{name: "engine failure", fail: true, end: func(t *testing.T, ts *testServer, c *client) {
			c.until(t, isType("task_failed", "a"))
		}},
		{name: "revocation", close: disconnectUnauthorized.code, code: control.EUnauthorized, end: func(t *testing.T, ts *testServer, c *client) {
			ts.session(t, 0).Revoke()
		}},
		{name: "shutdown", close: websocket.CloseGoingAway, code: control.EShuttingDown, end: func(t *testing.T, ts *testServer, c *client) {
			ts.cancel()
		}},
		{name: "credits run out", close: websocket.ClosePolicyViolation, code: control.EInsufficientCredits, end: func(t *testing.T, ts *testServer, c *client) {
			c.mustSend(t, cont("a", strings.Repeat("x", credits), false))
		}},
	}
	for _, kind := range storeKinds {
		for _, e := range endings {
			t.Run(kind+"/"+e.name, func(t *testing.T) {
				meter, ws := billedWorkspace(t, kind, credits)
				g := newGated()
				g.fail = e.fail
				deps := refDeps(g)
				deps.Billing = meterBilling{meter, ws}
				ts := startServer(t, Config{}, deps)
				c := ts.dial(t)
				c.mustSend(t, start("a", sentence, false))
				if got := <-g.started; got != strings.TrimSpace(sentence) {
					t.Fatalf("engine got %q", got)
				}
				for range frames - 1 {
					c.mustSend(t, cont("a", sentence, false))
				}
				c.sync(t)
				left := func() int64 {
					n, err := meter.Remaining(context.Background(), ws)
					if err != nil {
						t.Fatal(err)
					}
					return n
				}
				// Charged as the frames arrived.
				if got := left(); got != credits-frames*int64(len(sentence)) {
					t.Fatalf("%d left after %d frames, want %d", got, frames, credits-frames*len(sentence))
				}
				if e.fail {
					close(g.open)
				}
				e.end(t, ts, c)
				if e.close != 0 {
					code, evs := c.expectClose(t)
					if code != e.close {
						t.Fatalf("close %d, want %d", code, e.close)
					}
					if e.code != "" {
						last := evs[len(evs)-1]
						if last.Type != "error" || last.Code != e.code || !last.Fatal {
							t.Fatalf("last event %+v, want the fatal %s", last, e.code)
						}
					}
				} else {
					c.ws.Close()
				}
				ts.wait(t)
				if !e.fail {
					close(g.open)
				}
				if got := left(); got != credits-int64(len(sentence)) {
					t.Fatalf("%d left, want %d: only the sentence that reached the engine is billed", got, credits-len(sentence))
				}
				select {
				case s := <-g.started:
					t.Fatalf("%q reached the engine after the ending", s)
				default:
				}
			})
		}
	}
}

// Shutdown drains: an idle session ends at once, a session with an open
// context refuses new ones (non-fatal shutting_down) and lets it finish;
// each then ends with the fatal shutting_down and 1001. Nothing is
// refunded for text that was spoken.
func TestDrain(t *testing.T) {
	meter, ws := billedWorkspace(t, "sqlite", 1000)
	g := newGated()
	deps := refDeps(g)
	deps.Billing = meterBilling{meter, ws}
	ts := startServer(t, Config{}, deps)
	idle, busy := ts.dial(t), ts.dial(t)
	idleS, busyS := ts.session(t, 0), ts.session(t, 1)
	busy.mustSend(t, start("a", "One sentence. ", false))
	<-g.started
	var wg sync.WaitGroup
	for _, x := range []*Session{idleS, busyS} {
		wg.Add(1)
		go func() { defer wg.Done(); x.Drain() }()
	}
	wg.Wait()
	code, evs := idle.expectClose(t)
	if code != websocket.CloseGoingAway || len(evs) != 1 || evs[0].Code != control.EShuttingDown || !evs[0].Fatal {
		t.Fatalf("idle session: close %d after %+v", code, evs)
	}
	busy.mustSend(t, start("b", "Another. ", true))
	if ev := busy.until(t, isType("error", ""))[1]; ev.Type != "error" || ev.Code != control.EShuttingDown || ev.Fatal || ev.ContextID != "b" {
		t.Fatalf("task_start while draining: %+v", ev)
	}
	busy.mustSend(t, cont("a", "Two sentences.", true))
	close(g.open)
	code, evs = busy.expectClose(t)
	tr := collect(t, busy.all)
	checkDone(t, tr["a"], "One sentence.", "Two sentences.")
	if last := evs[len(evs)-1]; code != websocket.CloseGoingAway || last.Code != control.EShuttingDown || !last.Fatal {
		t.Fatalf("busy session: close %d after %+v", code, last)
	}
	ts.wait(t)
	if n, err := meter.Remaining(t.Context(), ws); err != nil || n != 1000-int64(len("One sentence. Two sentences.")) {
		t.Fatalf("%d left (%v)", n, err)
	}
}
