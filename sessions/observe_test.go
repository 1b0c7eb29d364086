package sessions

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"voicesvc/engine/reference"
)

// recorder is a ContextObserver that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	n      int
	open   int
	ends   []string // outcomes
	firsts int
	ids    map[string]bool
}

func (r *recorder) ContextStarted(time.Time, string) ContextSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.open++
	return &recSpan{r: r, id: fmt.Sprintf("%032x", r.n)}
}

type recSpan struct {
	r     *recorder
	id    string
	ended bool
}

func (s *recSpan) TraceID() string { return s.id }

func (s *recSpan) FirstAudio(ttfa, engine time.Duration) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if ttfa <= 0 || engine <= 0 || engine > ttfa {
		panic(fmt.Sprintf("first audio %v, engine %v", ttfa, engine))
	}
	s.r.firsts++
}

func (s *recSpan) End(outcome string, d time.Duration) {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if s.ended {
		panic("ended twice")
	}
	s.ended = true
	s.r.open--
	s.r.ends = append(s.r.ends, outcome)
	if s.r.ids == nil {
		s.r.ids = map[string]bool{}
	}
	s.r.ids[s.id] = true
}

func (r *recorder) outcomes() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]string(nil), r.ends...)
	sort.Strings(out)
	return out, r.open
}

// Every context is observed from task_start to its end, exactly once, with
// the outcome of its last frame; its trace_id is the observer's.
func TestObserver(t *testing.T) {
	rec := &recorder{}
	deps := refDeps(failing{reference.New()})
	deps.Observer = rec
	ts := startServer(t, Config{}, deps)
	c := ts.dial(t)
	c.mustSend(t, start("done", "All fine.", true))
	c.collect(t, isType("task_done", "done"))
	c.mustSend(t, start("bad", "FAIL here.", true))
	c.until(t, isType("task_failed", "bad"))
	c.mustSend(t, start("cancelled", "Waits for more", false))
	c.until(t, isType("task_started", "cancelled"))
	c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": "cancelled"})
	c.until(t, isType("task_cancelled", "cancelled"))
	c.mustSend(t, start("open", "Never finished", false))
	c.until(t, isType("task_started", "open"))
	for _, ev := range c.all {
		if (ev.Type == "task_done" || ev.Type == "task_failed" || ev.Type == "task_cancelled") && len(ev.TraceID) != 32 {
			t.Errorf("%s trace_id %q, want the observer's", ev.Type, ev.TraceID)
		}
	}
	c.ws.Close()
	ts.wait(t)
	got, open := rec.outcomes()
	want := []string{"cancelled", "invalid_input", "ok", "session_ended"}
	if fmt.Sprint(got) != fmt.Sprint(want) || open != 0 {
		t.Fatalf("outcomes %v (%d open), want %v", got, open, want)
	}
	if rec.firsts != 1 {
		t.Errorf("first audio reported %d times, want 1 (the context that spoke)", rec.firsts)
	}
}
