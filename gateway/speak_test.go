package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
)

func TestSpeakFormatsAndRates(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	path := "/voices/" + ss.voice + "/speak"
	formats := []codec.Format{codec.WAV, codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE, codec.MuLaw, codec.ALaw}
	for _, rate := range []int{8000, 24000, 48000} {
		for _, f := range formats {
			r := ss.do("POST", path, ss.key, map[string]any{"text": "Hello there.", "output_format": f, "sample_rate": rate})
			if r.status != 200 {
				t.Fatalf("%s %d: %d %s", f, rate, r.status, r.body)
			}
			var s []float32
			if f == codec.WAV {
				if ct := r.header.Get("Content-Type"); ct != "audio/wav" {
					t.Fatalf("wav content type %q", ct)
				}
				var got int
				got, s = wavInfo(t, r.body)
				if got != rate || r.header.Get("Content-Length") != strconv.Itoa(len(r.body)) {
					t.Fatalf("wav rate %d, length header %q", got, r.header.Get("Content-Length"))
				}
			} else {
				h := r.header
				if h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Sample-Rate") != strconv.Itoa(rate) ||
					h.Get("X-Audio-Format") != string(f) || h.Get("X-Channels") != "1" {
					t.Fatalf("%s %d headers: %v", f, rate, h)
				}
				if len(r.body)%f.BytesPerSample() != 0 {
					t.Fatalf("%s: %d bytes is not whole samples", f, len(r.body))
				}
				var err error
				if s, err = codec.DecodePCM(f, r.body); err != nil {
					t.Fatal(err)
				}
			}
			// "Hello there." is 11 non-space characters of 60 ms.
			if d := float64(len(s)) / float64(rate); d < 0.6 || d > 0.72 || rms(s) < 0.05 {
				t.Fatalf("%s %d: %.3f s, rms %.3f", f, rate, d, rms(s))
			}
			if r.header.Get("X-Billing-Remaining") == "" || !strings.Contains(r.header.Get("RateLimit"), `"concurrency";r=9`) {
				t.Fatalf("%s: admission headers %v", f, r.header)
			}
		}
	}
	short := ss.do("POST", path, ss.key, map[string]any{"text": "Hi.", "output_format": "s16le"})
	long := ss.do("POST", path, ss.key, map[string]any{"text": "Hi. A much longer sentence follows.", "output_format": "s16le"})
	if len(long.body) <= 3*len(short.body) {
		t.Fatalf("duration does not grow with the text: %d vs %d bytes", len(short.body), len(long.body))
	}
	// speed is a rate multiplier: twice as fast is half as long (the
	// reference engine's 60 ms a character divided by the speed).
	for _, sp := range []float64{0.5, 2} {
		r := ss.do("POST", path, ss.key, map[string]any{"text": "Hi. A much longer sentence follows.", "output_format": "s16le", "speed": sp})
		if r.status != 200 {
			t.Fatalf("speed %g: %d %s", sp, r.status, r.body)
		}
		ratio := float64(len(long.body)) / float64(len(r.body))
		if ratio < sp*0.9 || ratio > sp*1.1 {
			t.Errorf("speed %g: %d bytes against %d at speed 1 (ratio %.2f)", sp, len(r.body), len(long.body), ratio)
		}
	}
}

// TestSynthValidation: every 400 of docs/api.md#errors that applies to speak and
// stream, each with its code, and the 404s; none takes a slot or a charge.
func TestSynthValidation(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	draft := ss.createVoice(ss.key, "draft")["id"].(string)
	other := newSynthServer(t, synthOpts{}).voice
	speak := "/voices/" + ss.voice + "/speak"
	stream := "/voices/" + ss.voice + "/stream"
	cases := []struct {
		path   string
		body   any
		status int
		code   string
	}{
		{speak, `{"text":`, 400, "invalid_json"},
		{speak, `[1]`, 400, "invalid_json"},
		{speak, map[string]any{}, 400, "text_required"},
		{speak, map[string]any{"text": "  "}, 400, "text_required"},
		{speak, map[string]any{"text": 5}, 400, "invalid_request"},
		{speak, map[string]any{"text": strings.Repeat("a", 10_001)}, 400, "text_too_long"},
		{speak, map[string]any{"text": strings.Repeat("न", 10_001)}, 400, "text_too_long"},
		{speak, map[string]any{"text": "hi", "output_format": "mp3"}, 400, "invalid_output_format"},
		{speak, map[string]any{"text": "hi", "output_format": "WAV"}, 400, "invalid_output_format"},
		{stream, map[string]any{"text": "hi", "output_format": "wav"}, 400, "invalid_output_format"},
		{speak, map[string]any{"text": "hi", "sample_rate": 7999}, 400, "invalid_sample_rate"},
		{speak, map[string]any{"text": "hi", "sample_rate": 48001}, 400, "invalid_sample_rate"},
		{speak, map[string]any{"text": "hi", "sample_rate": "24000"}, 400, "invalid_sample_rate"},
		{stream, map[string]any{"text": "hi", "sample_rate": 22050.5}, 400, "invalid_sample_rate"},
		{speak, map[string]any{"text": "hi", "num_step": 33}, 400, "invalid_num_step"},
		{speak, map[string]any{"text": "hi", "num_step": 0}, 400, "invalid_num_step"},
		{speak, map[string]any{"text": "hi", "expressiveness": 1.5}, 400, "invalid_expressiveness"},
		{speak, map[string]any{"text": "hi", "expressiveness": "high"}, 400, "invalid_expressiveness"},
		{speak, map[string]any{"text": "hi", "speed": 4.5}, 400, "invalid_speed"},
		{stream, map[string]any{"text": "hi", "speed": 0.2}, 400, "invalid_speed"},
		{speak, map[string]any{"text": "hi", "speed": "fast"}, 400, "invalid_speed"},
		{speak, map[string]any{"text": "hi", "language": "fr"}, 400, "invalid_language"},
		{stream, map[string]any{"text": "hi", "language": "not a tag"}, 400, "invalid_language"},
		{"/voices/" + draft + "/speak", map[string]any{"text": "hi"}, 400, "voice_not_ready"},
		{"/voices/" + draft + "/stream", map[string]any{"text": "hi"}, 400, "voice_not_ready"},
		{"/voices/" + other + "/speak", map[string]any{"text": "hi"}, 404, "not_found"},
		{"/voices/nothex/stream", map[string]any{"text": "hi"}, 404, "not_found"},
	}
	for _, c := range cases {
		r := ss.do("POST", c.path, ss.key, c.body)
		r.failure(t, c.status, c.code)
	}
	ws, _ := ss.store.GetWorkspace(t.Context(), ss.ws.ID)
	rem, _ := ss.srv.synth.meter.Remaining(t.Context(), ws)
	if rem != 1_000_000 || ss.lim.InUse(ss.ws.ID, control.SlotStream) != 0 {
		t.Fatalf("refused requests were billed (remaining %d) or hold slots", rem)
	}
	// 10,000 characters are accepted; Hindi in Devanagari speaks.
	r := ss.do("POST", speak, ss.key, map[string]any{"text": strings.Repeat("a", 9_999) + ".", "output_format": "s16le", "sample_rate": 8000})
	if r.status != 200 || len(r.body) < 8000*2*500 {
		t.Fatalf("10,000 characters: %d, %d bytes", r.status, len(r.body))
	}
	hi := ss.readyVoice(ss.ws.ID, "hi")
	r = ss.do("POST", "/voices/"+hi+"/speak", ss.key, map[string]any{"text": "नमस्ते, आप कैसे हैं?"})
	if _, s := wavInfo(t, r.body); r.status != 200 || rms(s) < 0.05 {
		t.Fatalf("hindi: %d", r.status)
	}
}

// TestEngineErrors: busy, invalid input and other failures before any
// audio are JSON errors with their statuses, on both routes, and refunded.
func TestEngineErrors(t *testing.T) {
	g := &gatedEngine{Engine: newRef(0), failAt: 1}
	ss := newSynthServer(t, synthOpts{eng: g})
	for _, c := range []struct {
		err    error
		status int
		code   string
	}{
		{engine.ErrBusy, 503, "upstream_busy"},
		{fmt.Errorf("%w: nothing to say", engine.ErrInvalidInput), 422, "invalid_input"},
		{nil, 502, "upstream_error"},
	} {
		g.failErr = c.err
		for _, route := range []string{"speak", "stream"} {
			for _, f := range []string{"s16le", "f32le"} {
				r := ss.do("POST", "/voices/"+ss.voice+"/"+route, ss.key, map[string]any{"text": "hi there", "output_format": f})
				r.failure(t, c.status, c.code)
				if r.header.Get("X-Billing-Remaining") != "" {
					t.Fatalf("a refunded failure reports a balance")
				}
				if c.status == 503 && r.header.Get("Retry-After") != "1" {
					t.Fatalf("503 without Retry-After")
				}
			}
		}
	}
	ws, _ := ss.store.GetWorkspace(t.Context(), ss.ws.ID)
	if rem, _ := ss.srv.synth.meter.Remaining(t.Context(), ws); rem != 1_000_000 {
		t.Fatalf("failed syntheses were billed: remaining %d", rem)
	}
}

// TestSpeakRawFailsMidway: a raw speak that already streamed audio ends
// with a truncated body, not a short success.
func TestSpeakRawFailsMidway(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: &gatedEngine{Engine: newRef(0), failAt: 5}})
	resp := ss.post("/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "one two three four five six", "output_format": "s16le"})
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil || len(b) == 0 {
		t.Fatalf("status %d, %d bytes, err %v: want 200, some audio, then a read error", resp.StatusCode, len(b), err)
	}
}

// TestBillingAndPlan: X-Billing-Remaining falls by exactly the characters
// billed; a spent allowance is a 402 flat body; a plan without streaming is
// a 403 flat body on SSE with billing enforced.
func TestBillingAndPlan(t *testing.T) {
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce, plan: "free"})
	noRPS := 0
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{RPS: &noRPS})
	ss.srv.core.ResetKeys()
	path := "/voices/" + ss.voice + "/speak"
	remaining := func(r *response) int {
		n, err := strconv.Atoi(r.header.Get("X-Billing-Remaining"))
		if err != nil {
			t.Fatalf("X-Billing-Remaining %q: %s", r.header.Get("X-Billing-Remaining"), r.body)
		}
		return n
	}
	r := ss.do("POST", path, ss.key, map[string]any{"text": "नमस्ते hi", "language": "hi", "output_format": "s16le"})
	first := remaining(r)
	if first != 10_000-9 {
		t.Fatalf("remaining %d after 9 characters", first)
	}
	r = ss.do("POST", "/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "twelve chars"})
	if got := remaining(r); got != first-12 || r.status != 200 {
		t.Fatalf("remaining %d after 12 more, status %d", got, r.status)
	}
	used := int64(10_000 - 3)
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Used: &used})
	ss.srv.core.ResetKeys()
	r = ss.do("POST", path, ss.key, map[string]any{"text": "four"})
	if r.status != 402 || string(r.body) != `{"error":"quota_exhausted","unit":"character","limit":10000,"used":9997}` {
		t.Fatalf("402: %d %s", r.status, r.body)
	}
	r = ss.do("POST", path, ss.key, map[string]any{"text": "abc", "output_format": "s16le"})
	if r.status != 200 || remaining(r) != 0 {
		t.Fatalf("exact fit: %d %s", r.status, r.header)
	}
	off := false
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Streaming: &off})
	ss.srv.core.ResetKeys()
	r = ss.do("POST", "/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "x"})
	if r.status != 403 || string(r.body) != `{"error":"feature_disabled","feature":"streaming"}` {
		t.Fatalf("403: %d %s", r.status, r.body)
	}
	if ss.lim.InUse(ss.ws.ID, control.SlotStream) != 0 {
		t.Fatalf("a refused request holds a slot")
	}
}

// TestRateLimitHeaders: free plan, 2 per second: policy and RateLimit on
// every API request, the concurrency item on synthesis, 429 rate_limited.
func TestRateLimitHeaders(t *testing.T) {
	ss := newSynthServer(t, synthOpts{plan: "free"})
	r := ss.do("POST", "/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "hi"})
	if r.status != 200 || r.header.Get("RateLimit-Policy") != `"concurrency";q=2;qu="concurrent-requests", "rps";q=2;w=1` ||
		r.header.Get("RateLimit") != `"rps";r=1;t=0, "concurrency";r=1` {
		t.Fatalf("speak: %d %q %q", r.status, r.header.Get("RateLimit-Policy"), r.header.Get("RateLimit"))
	}
	r = ss.do("GET", "/voices/"+ss.voice, ss.key, nil)
	if r.status != 200 || r.header.Get("RateLimit") != `"rps";r=0;t=1` {
		t.Fatalf("get: %d %q", r.status, r.header.Get("RateLimit"))
	}
	r = ss.do("GET", "/voices/"+ss.voice, ss.key, nil)
	r.failure(t, 429, "rate_limited")
	if r.header.Get("Retry-After") != "1" || r.header.Get("RateLimit") != `"rps";r=0;t=1` {
		t.Fatalf("429 headers: %v", r.header)
	}
	pro := newSynthServer(t, synthOpts{})
	r = pro.do("GET", "/voices/"+pro.voice, pro.key, nil)
	if r.header.Get("RateLimit-Policy") != `"concurrency";q=10;qu="concurrent-requests"` || r.header.Values("RateLimit") != nil {
		t.Fatalf("pro: %v", r.header)
	}
}

// TestSpeakStreamOutlivesWriteTimeout: a streamed speak longer than the
// route's write timeout completes; the timeout bounds each write.
func TestSpeakStreamOutlivesWriteTimeout(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: newRef(1), cfg: Config{WriteTimeout: 300 * time.Millisecond}})
	resp := ss.post("/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "twelve chars", "output_format": "s16le"})
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err != nil || len(b) != 11*1440*2 {
		t.Fatalf("status %d, %d bytes, %v", resp.StatusCode, len(b), err)
	}
}

// TestBufferedSpeakFailureRefunded: a buffered speak (wav) whose engine
// fails after producing audio answers 502 with no audio, so nothing is
// billed (the hostile upstream of issue 26 did this with an endless body).
func TestBufferedSpeakFailureRefunded(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: &gatedEngine{Engine: newRef(0), failAt: 6}})
	resp := ss.post("/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "one two three four five six seven"})
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), control.EUpstreamError) {
		t.Fatalf("status %d %s, want 502 upstream_error", resp.StatusCode, body)
	}
	bal, err := ss.store.Balance(t.Context(), ss.ws.ID, control.Month(time.Now()), 1_000_000)
	if err != nil || bal.Used != 0 {
		t.Fatalf("billed %d characters (%v) for a failed buffered speak, want 0", bal.Used, err)
	}
}

// TestBufferedSpeakClientGone: a client that leaves while its wav is
// being built frees the engine and its slot at once, not when the engine
// ends (issue 26: a dripping upstream held the slot for minutes).
func TestBufferedSpeakClientGone(t *testing.T) {
	g := &gatedEngine{Engine: newRef(0), chunkGap: 200 * time.Millisecond}
	ss := newSynthServer(t, synthOpts{eng: g})
	conn, err := net.Dial("tcp", strings.TrimPrefix(ss.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	body := `{"text":"` + strings.Repeat("a long text that takes its time. ", 20) + `"}`
	fmt.Fprintf(conn, "POST %s/voices/%s/speak HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		APIRoot, ss.voice, ss.key, len(body), body)
	if _, ok := waitFor(5*time.Second, func() bool { return g.running.Load() == 1 }); !ok {
		t.Fatal("the synthesis never started")
	}
	conn.Close()
	if _, ok := waitFor(2*time.Second, func() bool {
		return g.running.Load() == 0 && ss.lim.InUse(ss.ws.ID, control.SlotStream) == 0
	}); !ok {
		t.Fatalf("engine running %d, slots %d after the client left", g.running.Load(), ss.lim.InUse(ss.ws.ID, control.SlotStream))
	}
}
