package sessions

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/control/sqlite"
	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/engine/reference"
)

// meterWith returns the real meter over a SQLite store, enforcing, for a
// workspace with this monthly allowance and these prepaid credits.
func meterWith(t *testing.T, allowance, credits int64) (control.Meter, *control.Workspace) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "voicesvc.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ws := &control.Workspace{Name: "w", Plan: "free", Billing: control.BillingEnforce, Allowance: &allowance}
	if err := db.CreateWorkspace(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	if ws, err = db.UpdateWorkspace(t.Context(), ws.ID, control.WorkspaceUpdate{Credits: &credits}); err != nil {
		t.Fatal(err)
	}
	return control.NewMeter(db, control.BillingEnforce), ws
}

// Characters run out mid-session, from the allowance (no credits) or from
// the credits: always fatal insufficient_credits and close 1008; the frame
// that did not fit is neither billed nor spoken.
func TestCreditExhaustion(t *testing.T) {
	for _, tc := range []struct {
		name               string
		allowance, credits int64
	}{{"allowance", 30, 0}, {"credits", 10, 20}} {
		t.Run(tc.name, func(t *testing.T) {
			meter, ws := meterWith(t, tc.allowance, tc.credits)
			deps := refDeps(nil)
			deps.Billing = meterBilling{meter, ws}
			ts := startServer(t, Config{}, deps)
			c := ts.dial(t)
			c.mustSend(t, start("a", "Hello world. ", false)) // 13 characters
			c.until(t, isType("sentence_done", "a"))
			c.mustSend(t, cont("a", "This is far more than what is left.", true))
			code, evs := c.expectClose(t)
			last := evs[len(evs)-1]
			if code != websocket.ClosePolicyViolation || last.Type != "error" || last.Code != "insufficient_credits" || !last.Fatal {
				t.Fatalf("close %d after %+v", code, last)
			}
			for _, ev := range evs {
				if ev.Type == "sentence_done" || ev.Type == "audio_chunk" && ev.SentenceIndex > 0 {
					t.Fatalf("the refused text was synthesized: %+v", ev)
				}
			}
			if left, err := meter.Remaining(t.Context(), ws); err != nil || left != tc.allowance+tc.credits-13 {
				t.Fatalf("%d characters left (%v), want %d", left, err, tc.allowance+tc.credits-13)
			}
		})
	}
}

// failing renders through the reference engine except for sentences that
// name a failure.
type failing struct{ *reference.Engine }

func (f failing) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	switch {
	case strings.Contains(req.Text, "FAIL"):
		return fmt.Errorf("%w: cannot say that", engine.ErrInvalidInput)
	case strings.Contains(req.Text, "DOWN"):
		return engine.ErrUnavailable
	}
	return f.Engine.Synthesize(ctx, req, emit)
}

// A terminal failure fails its own context only.
func TestTaskFailed(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(failing{reference.New()}))
	c := ts.dial(t)
	c.mustSend(t, start("bad", "Good one. FAIL here. Never said.", true))
	c.mustSend(t, start("good", "All fine.", true))
	done := 0
	c.until(t, func(ev event) bool {
		if ev.Type == "task_done" || ev.Type == "task_failed" {
			done++
		}
		return done == 2
	})
	got := collect(t, c.all)
	if f := got["bad"].end; f.Type != "task_failed" || f.Code != "invalid_input" || f.SentencesCompleted != 1 || f.TraceID == "" || f.RetryAfter != nil {
		t.Fatalf("bad: %+v", f)
	}
	checkDone(t, got["good"], "All fine.")
	// The failed context's slot and id are free.
	c.mustSend(t, start("bad", "Better now.", true))
	checkDone(t, c.collect(t, isType("task_done", "bad"))["bad"], "Better now.")
}

func TestEngineUnavailable(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(failing{reference.New()}))
	c := ts.dial(t)
	c.mustSend(t, start("a", "Engine DOWN.", true))
	code, evs := c.expectClose(t)
	if last := evs[len(evs)-1]; code != websocket.CloseTryAgainLater || last.Code != "unavailable" || !last.Fatal {
		t.Fatalf("close %d after %+v", code, last)
	}
}

// Server shutdown (Run's ctx cancelled) closes with 1001.
func TestShutdown(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(reference.New(reference.Options{RTF: 1})))
	c := ts.dial(t)
	c.mustSend(t, start("a", "A long sentence that is still being spoken.", true))
	c.until(t, isType("audio_chunk", "a"))
	ts.cancel()
	if code, _ := c.expectClose(t); code != websocket.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
}

// counting counts the audio the engine produced.
type counting struct {
	*reference.Engine
	samples atomic.Int64
}

func (e *counting) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	return e.Engine.Synthesize(ctx, req, func(c engine.Chunk) error {
		e.samples.Add(int64(len(c.Samples)))
		return emit(c)
	})
}

// A client that stops reading pauses synthesis: memory stays bounded by
// the queue and the socket buffers instead of the whole text's audio.
func TestBackpressure(t *testing.T) {
	eng := &counting{Engine: reference.New()}
	ts := startServer(t, Config{}, refDeps(eng))
	c := ts.dial(t)
	text := strings.Repeat("word ", 1999) // one sentence: ~480 s, 46 MB of f32le
	c.mustSend(t, start("a", text, true))
	// Wait until the engine stops advancing (it is blocked on the queue).
	last, still := int64(-1), 0
	for deadline := time.Now().Add(20 * time.Second); still < 5 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if n := eng.samples.Load(); n == last {
			still++
		} else {
			last, still = n, 0
		}
	}
	if mb := float64(last*4) / (1 << 20); still < 5 || mb > 24 {
		t.Fatalf("engine produced %.1f MiB for a client that reads nothing (settled: %v)", mb, still >= 5)
	}
	c.mustSend(t, `{"type":"task_cancel","context_id":"a"}`)
	c.until(t, isType("task_cancelled", "a"))
}

// 200 sessions, one context each, all streaming at once: each receives
// exactly its own audio, told apart by text and duration.
func TestManySessions(t *testing.T) {
	const n = 200
	ts := startServer(t, Config{}, refDeps(nil))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	begin := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- oneSession(ts, i, begin)
		}()
	}
	close(begin)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func oneSession(ts *testServer, i int, begin chan struct{}) error {
	c, err := ts.tryDial()
	if err != nil {
		return err
	}
	defer c.ws.Close()
	<-begin
	id := fmt.Sprintf("session-%d", i)
	text := fmt.Sprintf("Session %d says %s.", i, strings.Repeat("z", i%9+1))
	if err := c.send(start(id, text, true, "output_format", "s16le")); err != nil {
		return err
	}
	var bytes int
	for {
		ev, err := c.next()
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if ev.ContextID != id {
			return fmt.Errorf("%s received %s of %q", id, ev.Type, ev.ContextID)
		}
		switch ev.Type {
		case "task_started":
		case "audio_chunk":
			bytes += len(ev.Bin)
		case "sentence_done":
			if ev.Text != text || !near(ev.AudioDuration, refDuration(text)) {
				return fmt.Errorf("%s: sentence %q %.3f s, want %q %.3f s", id, ev.Text, ev.AudioDuration, text, refDuration(text))
			}
		case "task_done":
			if want := int(refDuration(text)*nativeRateHz+0.5) * 2; bytes != want || ev.NumSentences != 1 {
				return fmt.Errorf("%s: %d bytes in %d sentences, want %d in 1", id, bytes, ev.NumSentences, want)
			}
			return nil
		default:
			return fmt.Errorf("%s: unexpected %+v", id, ev)
		}
	}
}

// The embedded engine behind a session, when espeak-ng is installed.
func TestEspeak(t *testing.T) {
	e, err := espeak.New()
	if err != nil {
		t.Skip("espeak-ng not available:", err)
	}
	profile := e.Catalog()[0].Profile
	deps := refDeps(e)
	deps.Voice = func(context.Context, string) (*control.Voice, error) {
		return &control.Voice{ID: voiceReady, Status: control.VoiceReady, Profile: profile}, nil
	}
	ts := startServer(t, Config{}, deps)
	c := ts.dial(t)
	c.mustSend(t, start("e", "Hello from the embedded engine. ", false, "output_format", "s16le"))
	c.mustSend(t, cont("e", "It speaks a second sentence.", true))
	tr := c.collect(t, isType("task_done", "e"))["e"]
	if len(tr.sentences) != 2 || tr.sentences[1].Text != "It speaks a second sentence." || tr.end.NumSentences != 2 {
		t.Fatalf("got %+v", tr)
	}
	for _, s := range tr.sentences {
		if s.AudioDuration < 0.5 || s.AudioDuration > 5 {
			t.Fatalf("sentence %q: %.2f s of audio", s.Text, s.AudioDuration)
		}
	}
}
