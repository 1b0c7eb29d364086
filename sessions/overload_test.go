package sessions

import (
	"context"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/enginetest"
)

// TestCapacityRefusal: while the engine is at capacity, a new context is
// refused at once with task_failed upstream_busy (no task_started, nothing
// billed, the context id free again), whether or not its task_start
// carries text; a context already open keeps being spoken: its next
// sentence is a continuation, which the engine never refuses.
func TestCapacityRefusal(t *testing.T) {
	const credits = 1000
	tests := []struct {
		name    string
		msg     map[string]any
		refused bool
		chars   int // billed by msg when it is taken
	}{
		{"task_start with text", start("b", "A new context. ", true), true, 0},
		{"task_start without text", start("b", "", false), true, 0},
		{"task_continue of an open context", cont("a", "Second sentence here.", true), false, len("Second sentence here.")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			meter, ws := billedWorkspace(t, "sqlite", credits)
			o := enginetest.NewOverloaded(t, 20*time.Millisecond)
			p := o.Pool
			deps := refDeps(p)
			deps.Billing = meterBilling{meter, ws}
			ts := startServer(t, Config{}, deps)
			c := ts.dial(t)
			first := "First sentence here. "
			c.mustSend(t, start("a", first, false))
			c.until(t, isType("sentence_done", "a"))

			o.FallBehind()
			c.mustSend(t, tc.msg)
			if tc.refused {
				evs := c.until(t, func(ev event) bool { return ev.ContextID == "b" })
				f := evs[len(evs)-1]
				if f.Type != "task_failed" || f.Code != control.EUpstreamBusy || f.SentencesCompleted != 0 || f.TraceID == "" {
					t.Fatalf("first frame for the refused context: %+v, want task_failed upstream_busy", f)
				}
				// It says when to come back, as the HTTP Retry-After would.
				if f.RetryAfter == nil || *f.RetryAfter < 1 {
					t.Fatalf("refused context's task_failed has retry_after %v, want whole seconds >= 1", f.RetryAfter)
				}
				if s := p.Stats(); s.Refused != 1 {
					t.Errorf("pool refused %d, want 1", s.Refused)
				}
				// Not opened: the same id opens once the engine has room.
				o.Open()
				o.Wait(func(s engine.PoolStats) bool { return s.Requests == 0 })
				c.mustSend(t, start("b", "Room now.", true))
				checkDone(t, c.collect(t, isType("task_done", "b"))["b"], "Room now.")
				tc.chars = len("Room now.")
			} else {
				// The continuation is queued behind the held worker, not
				// refused; once the worker is free it is spoken.
				o.Wait(func(s engine.PoolStats) bool { return s.Queued == 2 })
				o.Open()
				checkDone(t, c.collect(t, isType("task_done", "a"))["a"], "First sentence here.", "Second sentence here.")
				if s := p.Stats(); s.Refused != 0 {
					t.Errorf("pool refused %d, want 0", s.Refused)
				}
			}
			left, err := meter.Remaining(context.Background(), ws)
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(credits - len(first) - tc.chars); left != want {
				t.Errorf("%d characters left, want %d: a refused context is not billed", left, want)
			}
		})
	}
}
