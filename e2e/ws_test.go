package e2e

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/e2e/harness"
	"voicesvc/engine/reference"
)

// Issue 6 acceptance: the realtime WebSocket against the real binary.

func protoHdr(tok string) http.Header {
	return http.Header{"Sec-Websocket-Protocol": {"service.v1, " + tok}}
}

// end sends session_end and reads to the close.
func (c *wsc) end() {
	c.t.Helper()
	c.send(map[string]any{"type": "session_end"})
	evs := c.until(is("close", ""))
	if len(evs) < 2 || evs[len(evs)-2].Reason != "client_request" || evs[len(evs)-1].CloseCode != 1000 {
		c.t.Fatalf("session_end: %v", evs)
	}
}

func TestWSHandshake(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", nil)

	// (a) X-API-Key: the 101 carries the synthesis headers.
	h := wsDial(t, srv, nil, http.Header{"X-Api-Key": {e.key}})
	if h.status != 101 {
		t.Fatalf("X-API-Key: %s %v", h.outcome(), h.err)
	}
	for _, k := range []string{"X-Request-Id", "X-Billing-Remaining", "RateLimit", "RateLimit-Policy"} {
		if h.header.Get(k) == "" {
			t.Errorf("101 lacks %s: %v", k, h.header)
		}
	}
	if !strings.Contains(h.header.Get("RateLimit"), `"concurrency";r=`) {
		t.Errorf("RateLimit %q", h.header.Get("RateLimit"))
	}
	h.c.start("a", e.voice, "Hello there.", true)
	checkDone(t, "a", collect(t, h.c.until(is("task_done", "a")))["a"], []string{"Hello there."})
	h.c.end()

	// (b) subprotocol ["service.v1", token]: service.v1 selected; the token
	// is spent by the handshake.
	tok := e.token(t, srv, map[string]any{})
	h = wsDial(t, srv, nil, protoHdr(tok))
	if h.status != 101 || h.c.ws.Subprotocol() != "service.v1" {
		t.Fatalf("subprotocol: %s %v", h.outcome(), h.err)
	}
	h.c.end()
	if h = wsDial(t, srv, nil, protoHdr(tok)); h.outcome() != "401 token_invalid" {
		t.Errorf("used token: %s", h.outcome())
	}
	// A token limited to one voice: another voice is a non-fatal
	// voice_not_allowed.
	other := otherVoice(t, srv, e.key, e.voice)
	h = wsDial(t, srv, nil, protoHdr(e.token(t, srv, map[string]any{"voice_ids": []string{e.voice}})))
	if h.status != 101 {
		t.Fatalf("limited token: %s", h.outcome())
	}
	h.c.start("x", other, "Hi.", true)
	h.c.expectError("voice_not_allowed")
	h.c.start("y", e.voice, "Hi.", true)
	h.c.until(is("task_done", "y"))
	h.c.end()

	// (c) access_token; (d) api_key, deprecated.
	if h = wsDial(t, srv, url.Values{"access_token": {e.token(t, srv, map[string]any{})}}, nil); h.status != 101 {
		t.Errorf("access_token: %s", h.outcome())
	} else {
		h.c.end()
	}
	h = wsDial(t, srv, url.Values{"api_key": {e.key}}, nil)
	if h.status != 101 || h.header.Get("Deprecation") == "" {
		t.Errorf("api_key: %s %v", h.outcome(), h.header)
	} else {
		h.c.end()
	}
	if h = wsDial(t, srv, url.Values{"api_key": {"vsk_" + strings.Repeat("x", 40)}}, nil); h.outcome() != "401" || h.header.Get("Deprecation") == "" {
		t.Errorf("bad api_key: %s %v", h.outcome(), h.header)
	}
	// 401: plain for keys, token_invalid for tokens, none at all.
	if h = wsDial(t, srv, nil, http.Header{"X-Api-Key": {"vsk_" + strings.Repeat("x", 40)}}); h.outcome() != "401" {
		t.Errorf("bad key: %s", h.outcome())
	}
	if h = wsDial(t, srv, url.Values{"access_token": {"vst_" + strings.Repeat("x", 40)}}, nil); h.outcome() != "401 token_invalid" {
		t.Errorf("bad token: %s", h.outcome())
	}
	if h = wsDial(t, srv, nil, nil); h.outcome() != "401" {
		t.Errorf("no credentials: %s", h.outcome())
	}

	// 402: nothing left to spend (billing enforced by default).
	broke := newEnv(t, srv, "pro", "--allowance", "10", "--used", "10")
	if h = wsDial(t, srv, nil, http.Header{"X-Api-Key": {broke.key}}); h.outcome() != "402 quota_exhausted" {
		t.Errorf("exhausted: %s %s", h.outcome(), h.body)
	}
	// 403: streaming not in the plan.
	nostream := newEnv(t, srv, "pro", "--streaming", "false")
	if h = wsDial(t, srv, nil, http.Header{"X-Api-Key": {nostream.key}}); h.outcome() != "403 feature_disabled" {
		t.Errorf("no streaming: %s %s", h.outcome(), h.body)
	}

	// 429 concurrency_limited: the session holds its stream slot; a token
	// refused by it stays valid.
	one := newEnv(t, srv, "pro", "--concurrency", "1")
	first := wsOpen(t, srv, one.key)
	tok = one.token(t, srv, map[string]any{})
	h = wsDial(t, srv, url.Values{"access_token": {tok}}, nil)
	if h.outcome() != "429 concurrency_limited" || h.header.Get("Retry-After") == "" {
		t.Errorf("second stream: %s %v", h.outcome(), h.header)
	}
	first.end()
	if !poll(10*time.Second, func() bool {
		h = wsDial(t, srv, url.Values{"access_token": {tok}}, nil)
		return h.status != 429
	}) || h.status != 101 {
		t.Errorf("token after a refusal: %s", h.outcome())
	}

	// 429 too_many_sessions: the 5th open session of a workspace.
	many := newEnv(t, srv, "pro", "--concurrency", "100")
	for i := 0; i < 4; i++ {
		wsOpen(t, srv, many.key)
	}
	if h = wsDial(t, srv, nil, http.Header{"X-Api-Key": {many.key}}); h.outcome() != "429 too_many_sessions" || h.header.Get("Retry-After") == "" {
		t.Errorf("5th session: %s %v", h.outcome(), h.header)
	}

	// 429 rate_limited: handshakes count as requests.
	free := newEnv(t, srv, "free", "--rps", "1", "--concurrency", "100", "--sessions", "100")
	limited := false
	for i := 0; i < 4 && !limited; i++ {
		h = wsDial(t, srv, nil, http.Header{"X-Api-Key": {free.key}})
		limited = h.outcome() == "429 rate_limited" && h.header.Get("Retry-After") != ""
	}
	if !limited {
		t.Errorf("no 429 rate_limited at 1 request/s: last %s", h.outcome())
	}
	// 503 upstream_busy needs an engine that reports itself unavailable at
	// the handshake: covered in process (gateway TestWSEngineUnavailable).
}

func TestWSContexts(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", nil)
	c := wsOpen(t, srv, e.key)
	two := []string{"Hello number one.", "A second sentence here."}

	// 1, 2 and 4 concurrent contexts.
	for _, n := range []int{1, 2, 4} {
		for i := 0; i < n; i++ {
			c.start(fmt.Sprintf("n%d-%d", n, i), e.voice, strings.Join(two, " "), true)
		}
		done := 0
		got := collect(t, c.until(func(ev wsEvent) bool {
			if ev.Type == "task_done" {
				done++
			}
			return done == n
		}))
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("n%d-%d", n, i)
			checkDone(t, id, got[id], two)
		}
	}

	// A 5th open context is refused; cancelling one frees its place.
	for i := 0; i < 4; i++ {
		c.start(fmt.Sprintf("p%d", i), e.voice, "Pending", false, "idle_flush_ms", 5000)
		c.until(is("task_started", fmt.Sprintf("p%d", i)))
	}
	c.start("p4", e.voice, "Pending", false)
	c.expectError("too_many_contexts")
	c.send(map[string]any{"type": "task_cancel", "context_id": "p0"})
	c.until(is("task_cancelled", "p0"))
	c.start("p4", e.voice, "Pending", false)
	c.until(is("task_started", "p4"))
	for _, id := range []string{"p1", "p2", "p3", "p4"} {
		c.send(map[string]any{"type": "task_cancel", "context_id": id})
		c.until(is("task_cancelled", id))
	}

	// Rejected messages: their code, not fatal, the session goes on.
	c.start("dup", e.voice, "Pending", false)
	c.until(is("task_started", "dup"))
	c.start("dup", e.voice, "Again", false)
	c.expectError("context_already_exists")
	c.send(map[string]any{"type": "task_dance", "context_id": "x"})
	c.expectError("invalid_message")
	c.start("num", e.voice, "Hi.", true, "sample_rate", "24000")
	c.expectError("invalid_message")
	c.start("long", e.voice, strings.Repeat("a", 10000), true)
	c.expectError("text_too_long")
	c.start("long", e.voice, strings.Repeat("a", 9999), false, "idle_flush_ms", 5000) // just under
	c.until(is("task_started", "long"))
	c.send(map[string]any{"type": "task_cancel", "context_id": "long"})
	c.until(is("task_cancelled", "long"))
	c.start("empty", e.voice, "", true)
	c.expectError("text_required")
	c.start("nv", "0123456789abcdef01234567", "Hi.", true)
	c.expectError("voice_not_found")
	if err := c.ws.WriteMessage(websocket.BinaryMessage, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	c.expectError("invalid_message")
	c.send(map[string]any{"type": "task_cancel", "context_id": "dup"})
	c.until(is("task_cancelled", "dup"))
	// A bad output_format is coerced to the default; opus is 20 ms packets
	// at 48 kHz.
	c.start("fmt", e.voice, "Coerced.", true, "output_format", "mp9")
	if ev := c.until(is("task_started", "fmt")); ev[len(ev)-1].AudioFormat != "f32le" || ev[len(ev)-1].SampleRate != 24000 {
		t.Fatalf("coerced format: %+v", ev[len(ev)-1])
	}
	c.until(is("task_done", "fmt"))
	c.start("opus", e.voice, "Opus packets.", true, "output_format", "opus")
	for _, ev := range c.until(is("task_done", "opus")) {
		bad := ev.Type == "task_started" && (ev.SampleRate != 48000 || ev.AudioFormat != "opus") ||
			ev.Type == "audio_chunk" && (len(ev.Bin) == 0 || math.Abs(ev.AudioDuration-0.02) > 1e-6)
		if bad {
			t.Fatalf("opus: %+v", ev)
		}
	}
	c.start("ok", e.voice, "Still working.", true)
	checkDone(t, "ok", collect(t, c.until(is("task_done", "ok")))["ok"], []string{"Still working."})

	// Word by word: a sentence is cut as soon as its end is certain (well
	// before its 5 s idle flush), a trailing fragment by the idle flush.
	c.start("w", e.voice, "", false, "idle_flush_ms", 5000)
	c.until(is("task_started", "w"))
	begin := time.Now()
	for _, w := range []string{"The ", "quick ", "fox ", "jumps. "} {
		c.cont("w", w, false)
	}
	evs := c.until(is("sentence_done", "w"))
	if s := evs[len(evs)-1]; s.Text != "The quick fox jumps." || time.Since(begin) > 4*time.Second {
		t.Fatalf("first sentence %q after %v", s.Text, time.Since(begin))
	}
	c.start("f", e.voice, "", false, "idle_flush_ms", 200)
	c.until(is("task_started", "f"))
	for _, w := range []string{"A ", "trailing ", "fragment"} {
		c.cont("f", w, false)
	}
	if evs = c.until(is("sentence_done", "f")); evs[len(evs)-1].Text != "A trailing fragment" {
		t.Fatalf("idle flush: %v", evs[len(evs)-1].Text)
	}
	c.cont("f", "", true) // finalize-only frame
	c.until(is("task_done", "f"))
	c.cont("w", "Over the lazy dog", true)
	evs = c.until(is("task_done", "w"))
	if d := evs[len(evs)-1]; d.NumSentences != 2 {
		t.Fatalf("w: %d sentences", d.NumSentences)
	}

	// A text frame over 1 MiB closes with 1009.
	big := []byte(`{"type":"task_continue","context_id":"w","text":"` + strings.Repeat("a", 1<<20) + `"}`)
	c.send(big[:1<<20+1])
	if evs = c.until(is("close", "")); evs[len(evs)-1].CloseCode != 1009 {
		t.Fatalf("over 1 MiB: %v", evs)
	}
	// A text frame that is not UTF-8 closes with 1007.
	c = wsOpen(t, srv, e.key)
	c.send([]byte("{\"type\":\"task_start\",\"text\":\"\xff\"}"))
	if evs = c.until(is("close", "")); evs[len(evs)-1].CloseCode != 1007 {
		t.Fatalf("not UTF-8: %v", evs)
	}
}

// otherVoice is a ready voice of the catalog other than not.
func otherVoice(t testing.TB, srv *harness.Server, key, not string) string {
	t.Helper()
	r := mustCall(t, "GET", srv.API+"/voices?page_size=100", nil, keyHdr(key)...)
	for _, v := range r.data(t)["voices"].([]any) {
		if m := v.(map[string]any); m["status"] == "ready" && m["id"] != not {
			return m["id"].(string)
		}
	}
	t.Fatal("no second voice")
	return ""
}

// TestWSEspeak: real speech through a session (espeak, in process).
func TestWSEspeak(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak", "--engine-workers", "0", "--billing", "meter"}})
	e := newEnv(t, srv, "pro")
	c := wsOpen(t, srv, e.key)
	want := []string{"Hello world.", "How are you today?"}
	c.start("e", e.voice, strings.Join(want, " "), true)
	x := collect(t, c.until(is("task_done", "e")))["e"]
	checkDone(t, "e", x, want)
	var sum float64
	var n int
	for _, ch := range x.chunks {
		for i := 0; i+4 <= len(ch.Bin); i += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(ch.Bin[i:]))
			sum += float64(v) * float64(v)
			n++
		}
	}
	if rms := math.Sqrt(sum / float64(max(n, 1))); rms < 0.01 || x.done.TotalAudioDuration < 0.5 {
		t.Fatalf("espeak audio: rms %.4f, %.2f s", rms, x.done.TotalAudioDuration)
	}
}

func TestWSCancelCredits(t *testing.T) {
	srv, e := wsServer(t, 1, "pro", nil) // paced engine (real time)

	// Cancel mid-sentence: task_cancelled, then nothing of that context.
	c := wsOpen(t, srv, e.key)
	c.start("c", e.voice, strings.Repeat("This sentence takes a good while to say. ", 6), true)
	c.until(is("audio_chunk", "c"))
	c.send(map[string]any{"type": "task_cancel", "context_id": "c"})
	evs := c.until(is("task_cancelled", "c"))
	if x := evs[len(evs)-1]; x.SentencesDropped == 0 || x.TraceID == "" {
		t.Errorf("task_cancelled %+v", x)
	}
	c.start("z", e.voice, "Next.", true)
	for _, ev := range c.until(is("task_done", "z")) {
		if ev.ContextID == "c" {
			t.Fatalf("%v after task_cancelled", ev)
		}
	}
	// session_end while a context speaks: its frames stop, session_ended
	// is the last message, then the close.
	c.start("s", e.voice, strings.Repeat("This sentence takes a good while to say. ", 6), true)
	c.until(is("audio_chunk", "s"))
	c.end()

	// Credits run out mid-session: fatal insufficient_credits, the frame
	// that exceeded the balance is not synthesized, close 1008.
	poor := newEnv(t, srv, "pro", "--allowance", "30")
	c = wsOpen(t, srv, poor.key)
	c.start("p", poor.voice, "Twenty characters ok", false, "idle_flush_ms", 5000)
	c.until(is("task_started", "p"))
	c.cont("p", " and this is too much.", true)
	evs = c.until(is("close", ""))
	var fatal bool
	for _, ev := range evs {
		fatal = fatal || ev.Type == "error" && ev.Code == "insufficient_credits" && ev.Fatal
		if ev.Type == "sentence_done" && strings.Contains(ev.Text, "too much") {
			t.Fatalf("refused text was synthesized: %v", ev.Text)
		}
	}
	if !fatal || evs[len(evs)-1].CloseCode != 1008 {
		t.Fatalf("credits: %v", evs)
	}
}

// TestWSCancelBeforeTaskDone: a cancel that arrives while a context's audio
// is still reaching the client (the engine may be done with it, its
// task_done not yet sent) stops that audio and answers task_cancelled. Only
// a cancel after task_done may be refused. The unpaced engine finishes
// each context long before its audio is out, which is the race.
func TestWSCancelBeforeTaskDone(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", nil)
	c := wsOpen(t, srv, e.key)
	text := strings.Repeat("A fairly long sentence for the flood. ", 3)
	for k := 0; k < 100; k++ {
		id := "k" + strconv.Itoa(k)
		c.start(id, e.voice, text, true)
		c.until(is("audio_chunk", id))
		c.send(map[string]any{"type": "task_cancel", "context_id": id})
		done := false
		for ev := c.mustNext(); ev.Type != "task_cancelled"; ev = c.mustNext() {
			switch {
			case ev.ContextID != id:
				t.Fatalf("cancel %d: %v of another context", k, ev)
			case ev.Type == "task_done":
				done = true
			case ev.Type == "error" && done && !ev.Fatal:
				ev.Type = "task_cancelled" // refused after task_done: fine
			case ev.Type == "error":
				t.Fatalf("cancel %d, before task_done: %v %q", k, ev, ev.Message)
			case done:
				t.Fatalf("cancel %d: %v after task_done", k, ev)
			}
			if ev.Type == "task_cancelled" {
				break
			}
		}
	}
}

// TestWSIdle: with --ws-idle-timeout 2s, a silent session gets
// session_ended idle, then the socket closes (1000).
func TestWSIdle(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", []string{"--ws-idle-timeout", "2s"})
	c := wsOpen(t, srv, e.key)
	evs := c.until(is("close", ""))
	if len(evs) != 2 || evs[0].Type != "session_ended" || evs[0].Reason != "idle" || evs[1].CloseCode != 1000 {
		t.Fatalf("idle: %v", evs)
	}
}

// TestWSShutdown: SIGTERM closes every open session with 1001, idle ones
// and one that is speaking, and the server still exits within its grace.
// The sessions run on goroutines of their own after the handshake, outside
// fasthttp's request handling, so only the server's own bookkeeping can
// reach them.
func TestWSShutdown(t *testing.T) {
	srv, e := wsServer(t, 1, "enterprise", nil, "--sessions", "50")
	conns := make([]*wsc, 5)
	for i := range conns {
		conns[i] = wsOpen(t, srv, e.key)
	}
	conns[0].start("talk", e.voice, strings.Repeat("This sentence keeps the engine busy. ", 4), true)
	conns[0].until(is("audio_chunk", "talk"))
	stopped := make(chan struct{})
	go func() { srv.Stop(); close(stopped) }()
	for i, c := range conns {
		evs := c.until(is("close", ""))
		if last := evs[len(evs)-1]; last.CloseCode != 1001 {
			t.Errorf("session %d: %v", i, evs)
		}
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("server did not exit")
	}
}

// TestWS200Sessions: 200 sessions of one workspace, one context each, all
// streaming at once; each gets exactly its own audio, told by the text it
// asked for and the duration the reference engine gives that text.
func TestWS200Sessions(t *testing.T) {
	if testing.Short() {
		t.Skip("200 sessions")
	}
	srv, e := wsServer(t, 0, "enterprise", nil, "--concurrency", "500", "--sessions", "500")
	const n = 200
	conns := make([]*wsc, n)
	for i := range conns {
		conns[i] = wsOpen(t, srv, e.key)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- oneSession(c, i, e.voice)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// oneSession runs context "s<i>" whose text has i%37+3 letters in its
// second word, so that every session expects a different duration.
func oneSession(c *wsc, i int, voice string) error {
	text := fmt.Sprintf("Session%d %s.", i, strings.Repeat("x", i%37+3))
	id := fmt.Sprintf("s%d", i)
	c.start(id, voice, text, true)
	var bytes int
	for {
		ev, err := c.next()
		if err != nil {
			return fmt.Errorf("%s: %v", id, err)
		}
		if ev.ContextID != id && ev.ContextID != "" {
			return fmt.Errorf("%s got %v", id, ev)
		}
		switch ev.Type {
		case "audio_chunk":
			bytes += len(ev.Bin)
		case "sentence_done":
			if ev.Text != text {
				return fmt.Errorf("%s: sentence %q, asked %q", id, ev.Text, text)
			}
		case "error", "close", "task_failed":
			return fmt.Errorf("%s: %v", id, ev)
		case "task_done":
			chars := len(strings.ReplaceAll(text, " ", ""))
			want := float64(chars) * reference.PerCharacter.Seconds()
			got := float64(bytes) / 4 / reference.Rate
			if math.Abs(ev.TotalAudioDuration-want) > 0.002 || math.Abs(got-want) > 0.002 {
				return fmt.Errorf("%s: %.3f s (%d bytes), want %.3f s", id, ev.TotalAudioDuration, bytes, want)
			}
			return nil
		}
	}
}
