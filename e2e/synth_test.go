package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/e2e/harness"
)

// Synthesis over HTTP against the real binary and the real engine
// (docs/api.md#speak, #stream; issue 4).

var synFormats = []codec.Format{codec.WAV, codec.S16LE, codec.S24LE, codec.S32LE, codec.F32LE, codec.F64LE}

// TestSpeakE2E: every format at 8, 24 and 48 kHz; duration grows with the
// text; Hindi speaks; 10,000 characters pass and 10,001 do not; every
// character billed shows in X-Billing-Remaining.
func TestSpeakE2E(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak", "--billing", "meter"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	voices := synVoices(t, srv, key)
	if voices["en"] == "" || voices["hi"] == "" {
		t.Fatalf("catalog voices: %v", voices)
	}
	speak := srv.API + "/voices/" + voices["en"] + "/speak"
	remaining := -1
	billed := func(r *synReply, chars int) {
		t.Helper()
		n, err := strconv.Atoi(r.header.Get("X-Billing-Remaining"))
		if err != nil || remaining >= 0 && n != remaining-chars {
			t.Fatalf("X-Billing-Remaining %q after %d characters, was %d", r.header.Get("X-Billing-Remaining"), chars, remaining)
		}
		remaining = n
	}
	const text = "The quick brown fox jumps over the lazy dog."
	for _, rate := range []int{8000, 24000, 48000} {
		for _, f := range synFormats {
			r := synPost(t, speak, key, map[string]any{"text": text, "output_format": f, "sample_rate": rate})
			if r.status != 200 {
				t.Fatalf("%s at %d: %d %s", f, rate, r.status, r.body)
			}
			billed(r, len(text))
			var s []float32
			if f == codec.WAV {
				var got int
				if got, s = synWAV(t, r.body); got != rate || r.header.Get("Content-Type") != "audio/wav" {
					t.Fatalf("wav: rate %d, %q", got, r.header.Get("Content-Type"))
				}
			} else {
				h := r.header
				if h.Get("Content-Type") != "application/octet-stream" || h.Get("X-Sample-Rate") != strconv.Itoa(rate) ||
					h.Get("X-Audio-Format") != string(f) || h.Get("X-Channels") != "1" || len(r.body)%f.BytesPerSample() != 0 {
					t.Fatalf("%s at %d: %v, %d bytes", f, rate, h, len(r.body))
				}
				s, _ = codec.DecodePCM(f, r.body)
			}
			if d := float64(len(s)) / float64(rate); d < 1 || d > 6 || synRMS(s) < 0.01 {
				t.Fatalf("%s at %d: %.2f s, rms %.4f", f, rate, d, synRMS(s))
			}
		}
	}
	short := synPost(t, speak, key, map[string]any{"text": "Hello.", "output_format": "s16le"})
	long := synPost(t, speak, key, map[string]any{"text": "Hello. " + text + " " + text, "output_format": "s16le"})
	if short.status != 200 || long.status != 200 || len(long.body) < 3*len(short.body) {
		t.Fatalf("duration does not grow with the text: %d vs %d bytes", len(short.body), len(long.body))
	}
	billed(short, 6)
	billed(long, 7+2*len(text)+1)
	const hindi = "नमस्ते, आप कैसे हैं?" // 20 code points, 50 bytes
	hi := synPost(t, srv.API+"/voices/"+voices["hi"]+"/speak", key, map[string]any{"text": hindi})
	if _, s := synWAV(t, hi.body); hi.status != 200 || len(s) < 8000 || synRMS(s) < 0.01 {
		t.Fatalf("hindi: %d, %d samples", hi.status, len(s))
	}
	billed(hi, utf8.RuneCountInString(hindi))
	big := strings.Repeat("Word after word. ", 588) + "Last" // 10,000 characters
	r := synPost(t, speak, key, map[string]any{"text": big, "output_format": "s16le", "sample_rate": 8000})
	if r.status != 200 || len(r.body) < 8000*2*60 {
		t.Fatalf("10,000 characters: %d, %d bytes", r.status, len(r.body))
	}
	billed(r, 10_000)
	synPost(t, speak, key, map[string]any{"text": big + "!"}).fail(t, 400, "text_too_long")
}

// TestStreamE2E: SSE in every raw format; wav refused; the 400s of
// section 7 with their codes; a draft voice is voice_not_ready.
func TestStreamE2E(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "espeak", "--billing", "meter"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	voice := synVoices(t, srv, key)["en"]
	stream := srv.API + "/voices/" + voice + "/stream"
	for i, f := range synFormats[1:] {
		rate := []int{8000, 24000, 48000}[i%3]
		r := synPost(t, stream, key, map[string]any{"text": "Streaming speech. It arrives in pieces.", "output_format": f, "sample_rate": rate})
		if r.status != 200 || r.header.Get("Content-Type") != "text/event-stream" || r.header.Get("Cache-Control") != "no-cache" ||
			r.header.Get("X-Accel-Buffering") != "no" || r.header.Get("X-Billing-Remaining") == "" {
			t.Fatalf("%s: %d %v", f, r.status, r.header)
		}
		if s := synCheckSSE(t, synSSE(t, r.body), rate, f); synRMS(s) < 0.01 {
			t.Fatalf("%s: silent", f)
		}
	}
	r := synPost(t, stream, key, map[string]any{"text": "Default format."})
	synCheckSSE(t, synSSE(t, r.body), 24000, codec.F32LE)

	req, _ := json.Marshal(map[string]any{"name": "draft", "consent": true})
	d := synPost(t, srv.API+"/voices", key, string(req))
	draft := d.json["data"].(map[string]any)["voice"].(map[string]any)["id"].(string)

	speak := srv.API + "/voices/" + voice + "/speak"
	for _, c := range []struct {
		url, body, code string
	}{
		{stream, `{"text":"hi","output_format":"wav"}`, "invalid_output_format"},
		{speak, `{"text":"hi","output_format":"ogg"}`, "invalid_output_format"},
		{speak, `{"text":`, "invalid_json"},
		{speak, `{}`, "text_required"},
		{stream, `{"text":""}`, "text_required"},
		{speak, `{"text":"hi","sample_rate":96000}`, "invalid_sample_rate"},
		{stream, `{"text":"hi","sample_rate":"24000"}`, "invalid_sample_rate"},
		{speak, `{"text":"hi","num_step":64}`, "invalid_num_step"},
		{stream, `{"text":"hi","expressiveness":-0.1}`, "invalid_expressiveness"},
		{speak, `{"text":"hi","language":"xx-notreal"}`, "invalid_language"},
		{srv.API + "/voices/" + draft + "/speak", `{"text":"hi"}`, "voice_not_ready"},
		{srv.API + "/voices/" + draft + "/stream", `{"text":"hi"}`, "voice_not_ready"},
	} {
		synPost(t, c.url, key, c.body).fail(t, 400, c.code)
	}
	synPost(t, srv.API+"/voices/0123456789abcdef01234567/speak", key, `{"text":"hi"}`).fail(t, 404, "not_found")
}

// TestSynthLimitsE2E: free plan, billing enforced: the third concurrent
// stream is 429 concurrency_limited; a spent allowance is a 402 flat body.
func TestSynthLimitsE2E(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference", "--reference-rtf", "1", "--billing", "enforce"}})
	ws, key := harness.Workspace(t, srv.DB, "free")
	harness.Admin(t, srv.DB, "workspace", "update", "--id", ws, "--rps", "0") // three requests in a second
	voice := synVoices(t, srv, key)["en"]
	stream := srv.API + "/voices/" + voice + "/stream"
	long := map[string]any{"text": strings.Repeat("a long stream ", 20)}
	deadline := time.Now().Add(5 * time.Second)
	var open []io.Closer
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for i := 0; i < 2; i++ {
		resp := synOpen(t, stream, key, long)
		open = append(open, resp.Body)
		if resp.StatusCode == 429 && time.Now().Before(deadline) {
			i-- // the rps override has not reached the server yet
			resp.Body.Close()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d: %d %s", i, resp.StatusCode, b)
		}
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		if line != "event: start\n" {
			t.Fatalf("stream %d began %q", i, line)
		}
	}
	r := synPost(t, stream, key, long)
	r.fail(t, 429, "concurrency_limited")
	if r.header.Get("Retry-After") == "" || !strings.Contains(r.header.Get("RateLimit"), `"concurrency";r=0`) {
		t.Fatalf("429 headers: %v", r.header)
	}

	// A client that leaves frees its slot: the engine work stops and the
	// next stream is let through.
	open[0].Close()
	for start := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		resp := synOpen(t, stream, key, map[string]any{"text": "short"})
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 {
			break
		}
		if time.Since(start) > 2*time.Second {
			t.Fatalf("slot not freed after the client left: %d %s", resp.StatusCode, b)
		}
	}
	metrics, _ := httpGetBody(srv.URL + "/metrics")
	if !strings.Contains(metrics, `voicesvc_synth_total{dialect="native",outcome="client_gone",transport="sse"} 1`) {
		t.Errorf("no client_gone outcome in /metrics")
	}

	harness.Admin(t, srv.DB, "workspace", "update", "--id", ws, "--used", "10000", "--concurrency", "5")
	speak := srv.API + "/voices/" + voice + "/speak"
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		r = synPost(t, speak, key, map[string]any{"text": "hi"})
		if r.status == 402 || time.Since(start) > 3*time.Second {
			break
		}
	}
	if r.status != 402 || string(r.body) != `{"error":"quota_exhausted","unit":"character","limit":10000,"used":10000}` {
		t.Fatalf("402: %d %s", r.status, r.body)
	}
}

func httpGetBody(url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}
