package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestUpstreamWebSocket: B's voice through A's WebSocket: several contexts
// of several sentences each, with audio as long as B makes itself within
// 5%; a cancel ends the context; B killed mid-sentence fails the context
// with task_failed upstream_error.
func TestUpstreamWebSocket(t *testing.T) {
	p := startUpPair(t, "")
	direct := synPost(t, p.b.API+"/voices/"+p.voiceB+"/speak", p.keyB,
		map[string]any{"text": upText, "output_format": "wav", "sample_rate": 24000})
	if direct.status != 200 {
		t.Fatalf("B speak: %d %s", direct.status, direct.body)
	}
	want := wavSeconds(t, direct.body)

	c := wsOpen(t, p.a, p.keyA)
	for _, id := range []string{"a", "b", "c"} {
		c.start(id, p.voiceA, upText, true, "output_format", "f32le", "sample_rate", 24000)
	}
	var evs []wsEvent
	done := 0
	for done < 3 {
		ev := c.mustNext()
		evs = append(evs, ev)
		switch ev.Type {
		case "task_done":
			done++
		case "task_failed", "error", "close":
			t.Fatalf("unexpected %v: %+v", ev, ev)
		}
	}
	sentences := []string{"The gateway speaks with another server's voice.", "Each sentence is one request upstream.",
		"The audio must match what that server makes itself."}
	for id, x := range collect(t, evs) {
		checkDone(t, id, x, sentences)
		if got := x.done.TotalAudioDuration; !within(got, want, 0.05) {
			t.Fatalf("context %s: %.3f s, B made %.3f s", id, got, want)
		}
	}

	// Cancel while it speaks: task_cancelled, nothing more of it, and the
	// session goes on.
	long := strings.Repeat("This context will be cancelled before it ends. ", 20)
	c.start("x", p.voiceA, long, true, "output_format", "f32le", "sample_rate", 24000)
	c.until(is("audio_chunk", "x"))
	c.send(map[string]any{"type": "task_cancel", "context_id": "x"})
	c.until(is("task_cancelled", "x"))
	c.start("y", p.voiceA, "After the cancel.", true, "output_format", "f32le", "sample_rate", 24000)
	for _, ev := range c.until(is("task_done", "y")) {
		if ev.ContextID == "x" {
			t.Fatalf("%v after task_cancelled", ev)
		}
	}

	// B dies while a long sentence streams.
	c.start("k", p.voiceA, strings.Repeat("and the stream goes on and on without a stop ", 60)+".", true,
		"output_format", "f32le", "sample_rate", 24000)
	c.until(is("audio_chunk", "k"))
	p.b.Kill()
	evs = c.until(func(e wsEvent) bool { return e.ContextID == "k" && (e.Type == "task_failed" || e.Type == "task_done") })
	if last := evs[len(evs)-1]; last.Type != "task_failed" || last.Code != "upstream_error" {
		t.Fatalf("after B died: %+v", last)
	}
}

// TestUpstreamWebSocketCancel: a task_cancel on A closes A's request to
// the upstream at once. The fake streams 20 ms chunks until its client
// leaves; the median of 5 is asserted under 20 ms and each time logged.
func TestUpstreamWebSocketCancel(t *testing.T) {
	f := newFakeUpstream(t)
	p := startUpPair(t, fakeEngines(f, "5s"))
	voice := voiceByAlias(t, p.a, p.keyA, "fake-stream")
	c := wsOpen(t, p.a, p.keyA)
	var gaps []time.Duration
	for i := 1; i <= 5; i++ {
		id := "c" + string(rune('0'+i))
		c.start(id, voice, "Stream until cancelled.", true, "output_format", "s16le")
		c.until(is("audio_chunk", id))
		sent := time.Now()
		c.send(map[string]any{"type": "task_cancel", "context_id": id})
		gap := f.waitGone(t, i).Sub(sent)
		c.until(is("task_cancelled", id))
		gaps = append(gaps, gap)
		t.Logf("cancel %d: upstream request closed %v after the task_cancel was sent", i, gap)
	}
	slices.Sort(gaps)
	if gaps[2] > 20*time.Millisecond {
		t.Fatalf("upstream requests outlived the cancel by %v (median of %v)", gaps[2], gaps)
	}
}
