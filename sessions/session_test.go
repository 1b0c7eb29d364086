package sessions

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fasthttp/websocket"

	"voicesvc/engine/reference"
)

// 1, 2 and 4 contexts at once on one socket: each gets its own sentences,
// in order, every binary frame right after its own audio_chunk.
func TestConcurrentContexts(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	for _, n := range []int{1, 2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := ts.dial(t)
			want := map[string][]string{}
			for i := range n {
				id := fmt.Sprintf("ctx-%d", i)
				want[id] = []string{fmt.Sprintf("Context %d speaks first.", i), strings.Repeat("Then more words. ", i+1)[:16]}
				c.mustSend(t, start(id, want[id][0]+" "+want[id][1], true))
			}
			done := 0
			evs := c.until(t, func(ev event) bool {
				if ev.Type == "task_done" {
					done++
				}
				return done == n
			})
			got := collect(t, evs)
			for id, sents := range want {
				if got[id].started.SampleRate != 24000 || got[id].started.AudioFormat != "f32le" {
					t.Fatalf("task_started %+v", got[id].started)
				}
				checkDone(t, got[id], sents...)
				for _, ch := range got[id].chunks {
					if len(ch.Bin) != int(ch.AudioDuration*24000+0.5)*4 {
						t.Fatalf("%d bytes for %.4f s of f32le", len(ch.Bin), ch.AudioDuration)
					}
				}
			}
		})
	}
}

func TestFifthContextRefused(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	for i := range 4 {
		c.mustSend(t, start(fmt.Sprint(i), "", false))
		c.until(t, isType("task_started", fmt.Sprint(i)))
	}
	c.mustSend(t, start("4", "Hello.", true))
	ev := c.until(t, isType("error", ""))[0]
	if ev.Code != "too_many_contexts" || ev.Fatal || ev.ContextID != "4" {
		t.Fatalf("got %+v", ev)
	}
	// Finishing one frees its slot at once.
	c.mustSend(t, cont("0", "", true))
	c.until(t, isType("task_done", "0"))
	c.mustSend(t, start("4", "Hello there.", true))
	checkDone(t, c.collect(t, isType("task_done", "4"))["4"], "Hello there.")
}

// Each refusal is a non-fatal error frame with its code; the session keeps
// working afterwards.
func TestNonFatalErrors(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("open", "", false))
	c.until(t, isType("task_started", "open"))
	cases := []struct {
		name string
		msg  any
		code string
	}{
		{"duplicate context_id", start("open", "Hi.", false), "context_already_exists"},
		{"unknown type", `{"type":"task_pause","context_id":"open"}`, "invalid_message"},
		{"no type", `{"context_id":"open"}`, "invalid_message"},
		{"not JSON", `{"type":`, "invalid_message"},
		{"string number", start("x", "Hi.", true, "sample_rate", "24000"), "invalid_message"},
		{"string num_step", start("x", "Hi.", true, "num_step", "4"), "invalid_message"},
		{"sample_rate range", start("x", "Hi.", true, "sample_rate", 4000), "invalid_message"},
		{"num_step range", start("x", "Hi.", true, "num_step", 33), "invalid_message"},
		{"expressiveness range", start("x", "Hi.", true, "expressiveness", 1.5), "invalid_message"},
		{"guidance range", start("x", "Hi.", true, "guidance_scale", 11), "invalid_message"},
		{"length_scale zero", start("x", "Hi.", true, "length_scale", 0), "invalid_message"},
		{"finalize type", start("x", "Hi.", false, "finalize", "yes"), "invalid_message"},
		{"text 10000", start("x", runes(10000), false), "text_too_long"},
		{"empty text finalize", start("x", "", true), "text_required"},
		{"bad language", start("x", "Hi.", true, "language", "xx"), "invalid_language"},
		{"unknown voice", map[string]any{"type": "task_start", "context_id": "x", "voice_id": "cccccccccccccccccccccccc"}, "voice_not_found"},
		{"voice not ready", map[string]any{"type": "task_start", "context_id": "x", "voice_id": voiceDraft}, "voice_not_found"},
		{"voice not allowed", map[string]any{"type": "task_start", "context_id": "x", "voice_id": voiceDenied}, "voice_not_allowed"},
		{"continue unknown", cont("nope", "Hi.", false), "invalid_message"},
		{"cancel unknown", `{"type":"task_cancel","context_id":"nope"}`, "invalid_message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c.mustSend(t, tc.msg)
			ev := c.mustNext(t)
			if ev.Type != "error" || ev.Code != tc.code || ev.Fatal || ev.Message == "" {
				t.Fatalf("got %+v, want non-fatal %s", ev, tc.code)
			}
		})
	}
	// The refused frames opened nothing: "x" is free, and 9,999 characters
	// are accepted.
	c.mustSend(t, start("x", runes(9999), false))
	c.until(t, isType("task_started", "x"))
	c.mustSend(t, `{"type":"task_cancel","context_id":"x"}`)
	c.until(t, isType("task_cancelled", "x"))
	c.mustSend(t, cont("open", "Still working.", true))
	checkDone(t, c.collect(t, isType("task_done", "open"))["open"], "Still working.")
}

// Text streamed token by token: a sentence is rendered as soon as its end
// is certain (the next token), a trailing fragment after idle_flush_ms.
func TestWordByWord(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("w", "", false, "idle_flush_ms", 200))
	c.until(t, isType("task_started", "w"))
	for _, tok := range []string{"Hello", " world", ".", " How"} {
		c.mustSend(t, cont("w", tok, false))
	}
	// No more text is sent until the first sentence is done: it must have
	// been cut when " How" arrived.
	c.until(t, isType("sentence_done", "w"))
	for _, tok := range []string{" are", " you", "?"} {
		c.mustSend(t, cont("w", tok, false))
	}
	// Nothing certain ends "How are you?": only the idle flush renders it.
	c.until(t, isType("sentence_done", "w"))
	c.mustSend(t, cont("w", " Bye", false))
	c.mustSend(t, cont("w", "", true)) // finalize-only frame
	c.until(t, isType("task_done", "w"))
	checkDone(t, collect(t, c.all)["w"], "Hello world.", "How are you?", "Bye")
}

// Cancel mid-sentence: task_cancelled, then nothing more of that context,
// while another context on the socket carries on.
func TestCancel(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(reference.New(reference.Options{RTF: 1})))
	c := ts.dial(t)
	c.mustSend(t, start("long", "This sentence takes a few seconds to say aloud. And another one after it.", true))
	c.mustSend(t, start("other", "", false))
	c.until(t, isType("audio_chunk", "long"))
	c.mustSend(t, `{"type":"task_cancel","context_id":"long"}`)
	evs := c.until(t, isType("task_cancelled", "long"))
	ev := evs[len(evs)-1]
	if ev.SentencesCompleted != 0 || ev.SentencesDropped != 2 || ev.TraceID == "" {
		t.Fatalf("got %+v", ev)
	}
	c.mustSend(t, cont("other", "Short.", true))
	for _, ev := range c.until(t, isType("task_done", "other")) {
		if ev.ContextID == "long" {
			t.Fatalf("%s of the cancelled context after task_cancelled", ev.Type)
		}
	}
	// The id is free again.
	c.mustSend(t, start("long", "Again.", true))
	checkDone(t, c.collect(t, isType("task_done", "long"))["long"], "Again.")
}

func TestOversizedFrame(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	msg := `{"type":"task_start","text":"` + strings.Repeat("a", 1<<20) + `"}`
	c.mustSend(t, msg[:1<<20+1])
	if code, _ := c.expectClose(t); code != websocket.CloseMessageTooBig {
		t.Fatalf("close %d, want 1009", code)
	}
}

func TestInvalidUTF8(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, "{\"type\":\"task_start\",\"text\":\"\xff\"}")
	if code, _ := c.expectClose(t); code != websocket.CloseInvalidFramePayloadData {
		t.Fatalf("close %d, want 1007", code)
	}
}

func TestIdleTimeout(t *testing.T) {
	ts := startServer(t, Config{IdleTimeout: 300e6}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("a", "Some words.", true))
	code, evs := c.expectClose(t)
	last := evs[len(evs)-1]
	if code != websocket.CloseNormalClosure || last.Type != "session_ended" || last.Reason != "idle" {
		t.Fatalf("close %d after %+v", code, last)
	}
	checkDone(t, collect(t, evs[:len(evs)-1])["a"], "Some words.")
}

func TestSessionEnd(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("a", "", false))
	c.mustSend(t, `{"type":"session_end"}`)
	code, evs := c.expectClose(t)
	last := evs[len(evs)-1]
	if code != websocket.CloseNormalClosure || last.Type != "session_ended" || last.Reason != "client_request" {
		t.Fatalf("close %d after %+v", code, last)
	}
}

// Opus: one 20 ms packet per audio_chunk at 48 kHz.
func TestOpus(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("o", "Opus audio now.", true, "output_format", "opus", "sample_rate", 16000))
	got := c.collect(t, isType("task_done", "o"))["o"]
	if got.started.SampleRate != 48000 || got.started.AudioFormat != "opus" {
		t.Fatalf("task_started %+v", got.started)
	}
	for _, ch := range got.chunks {
		if ch.AudioDuration != 0.02 || len(ch.Bin) == 0 || len(ch.Bin) > 4000 {
			t.Fatalf("chunk %+v (%d bytes)", ch, len(ch.Bin))
		}
	}
	// Padded up to whole packets.
	if n, min := len(got.chunks), int(refDuration("Opus audio now.")/0.02); n < min || n > min+2 {
		t.Fatalf("%d packets for %.2f s", n, refDuration("Opus audio now."))
	}
}

// An invalid output_format is coerced to the default, not refused.
func TestFormatCoerced(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("a", "Hi there.", true, "output_format", "wav", "sample_rate", 16000))
	got := c.collect(t, isType("task_done", "a"))["a"]
	if got.started.AudioFormat != "f32le" || got.started.SampleRate != 16000 {
		t.Fatalf("task_started %+v", got.started)
	}
	checkDone(t, got, "Hi there.")
}
