package sessions

import (
	"strings"
	"testing"
)

// A context_id is echoed in every frame of its context: one of 60,000
// characters made each audio frame's header 60 KB. Ids over maxClientIDChars characters
// are refused (non-fatal invalid_message, the id not echoed back); maxClientIDChars are
// accepted.
func TestContextIDLength(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	long := strings.Repeat("x", maxClientIDChars+1)
	for _, msg := range []any{
		start(long, "Hello there.", true),
		cont(long, "Hi.", false),
		map[string]any{"type": "task_cancel", "context_id": long},
		start(strings.Repeat("é", maxClientIDChars+1), "Hello there.", true),
	} {
		c.mustSend(t, msg)
		ev := c.mustNext(t)
		if ev.Type != "error" || ev.Code != "invalid_message" || ev.Fatal || !strings.Contains(ev.Message, "context_id") {
			t.Fatalf("got %+v, want non-fatal invalid_message naming context_id", ev)
		}
		if len(ev.ContextID) > maxClientIDChars {
			t.Fatalf("the refused id was echoed (%d characters)", len(ev.ContextID))
		}
	}
	ok := strings.Repeat("é", maxClientIDChars)
	c.mustSend(t, start(ok, "Hello there.", true))
	checkDone(t, c.collect(t, isType("task_done", ok))[ok], "Hello there.")
}
