package sessions

import (
	"context"
	"sync"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// aheadEngine is the reference engine, paced, asking to render ahead like
// an upstream engine; it records when each sentence's call began and ended.
type aheadEngine struct {
	engine.Engine
	mu    sync.Mutex
	calls map[string][2]time.Time
}

func (a *aheadEngine) RendersAhead() bool { return true }

func (a *aheadEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	began := time.Now()
	err := a.Engine.Synthesize(ctx, req, emit)
	a.mu.Lock()
	a.calls[req.Text] = [2]time.Time{began, time.Now()}
	a.mu.Unlock()
	return err
}

// TestRenderAhead: with an engine that renders ahead, a context's next
// sentence starts while the current one is still rendering (the gap
// between sentences is not a round trip to the upstream), never more than
// one ahead, and the audio is the same and in order. A cancel stops the
// sentence ahead too (goleak checks nothing is left running).
func TestRenderAhead(t *testing.T) {
	eng := &aheadEngine{Engine: reference.New(reference.Options{RTF: 0.2}), calls: map[string][2]time.Time{}}
	ts := startServer(t, Config{}, refDeps(eng))
	c := ts.dial(t)
	sents := []string{"The first sentence is long enough to take a while.", "The second follows it.", "The third ends it."}
	c.mustSend(t, start("a", sents[0]+" "+sents[1]+" "+sents[2], true))
	checkDone(t, collect(t, c.until(t, isType("task_done", "a")))["a"], sents...)
	eng.mu.Lock()
	first, second, third := eng.calls[sents[0]], eng.calls[sents[1]], eng.calls[sents[2]]
	eng.mu.Unlock()
	if !second[0].Before(first[1]) {
		t.Fatalf("the second sentence began %v after the first ended", second[0].Sub(first[1]))
	}
	if third[0].Before(first[1]) {
		t.Fatal("the third sentence began while the first rendered: two ahead")
	}

	c.mustSend(t, start("b", "A sentence to cancel while it renders, long enough. And one ahead of it.", true))
	c.until(t, isType("audio_chunk", "b"))
	c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": "b"})
	c.until(t, isType("task_cancelled", "b"))
}
