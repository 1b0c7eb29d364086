package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"voicesvc/codec"
	"voicesvc/control"
)

// The ElevenLabs dialect (dialect/elevenlabs, docs/dialects.md#elevenlabs)
// against a real server: formats, alignment, lists, credentials and the
// vendor's error shape.

const elBase = "/compat/elevenlabs/v1"

// elDo sends a request to the dialect with the xi-api-key header (none
// when key is "") and returns the response with its body read.
func (ss *synthServer) elDo(method, path, key string, body any, headers ...string) (*http.Response, []byte) {
	ss.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, ss.base+APIRoot+elBase+path, r)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("xi-api-key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ss.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ss.t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// checkELError checks {"detail": {"status", "message", "code"?}} with the
// status and returns the detail.
func checkELError(t *testing.T, resp *http.Response, b []byte, status int, vendor, code string) map[string]any {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	var body struct {
		Detail map[string]any `json:"detail"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Detail == nil {
		t.Fatalf("not {detail: {...}}: %s", b)
	}
	d := body.Detail
	if m, _ := d["message"].(string); m == "" || d["status"] != vendor {
		t.Errorf("status %v (want %s), message %v: %s", d["status"], vendor, d["message"], b)
	}
	if c, _ := d["code"].(string); c != code {
		t.Errorf("code %q, want %q: %s", c, code, b)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("content type %q", resp.Header.Get("Content-Type"))
	}
	return d
}

// TestElevenLabsFormats: every family of output_format by voice id and by
// catalog alias, on convert and stream: the raw formats hold the samples
// of the asked rate (the same duration at each), the containers decode to
// it, and the media types are audio/*.
func TestElevenLabsFormats(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	alias := ss.srv.engine.Catalog()[0].Alias
	text := "Hello there. This is the ElevenLabs dialect."
	var seconds float64 // of pcm_24000
	for i, tc := range []struct {
		format, path, voice, ctype string
		rate, width                int
	}{
		{"pcm_24000", "", ss.voice, "audio/pcm", 24000, 2},
		{"pcm_16000", "/stream", alias, "audio/pcm", 16000, 2},
		{"pcm_22050", "", ss.voice, "audio/pcm", 22050, 2},
		{"pcm_44100", "/stream", ss.voice, "audio/pcm", 44100, 2},
		{"ulaw_8000", "", alias, "audio/basic", 8000, 1},
		{"alaw_8000", "/stream", ss.voice, "audio/x-alaw-basic", 8000, 1},
		{"wav_16000", "", ss.voice, "audio/wav", 16000, 0},
		{"opus_48000_64", "", ss.voice, "audio/ogg", 48000, 0},
		{"mp3_44100_128", "/stream", ss.voice, "audio/mpeg", 44100, 0},
		{"", "", alias, "audio/mpeg", 44100, 0}, // the default: mp3_44100_128
	} {
		if !codec.MP3Available && tc.ctype == "audio/mpeg" {
			continue
		}
		path := "/text-to-speech/" + tc.voice + tc.path
		if tc.format != "" {
			path += "?output_format=" + tc.format + "&enable_logging=true&optimize_streaming_latency=1"
		}
		body := map[string]any{"text": text, "model_id": "eleven_multilingual_v2", "seed": 7,
			"voice_settings": map[string]any{"stability": 0.5, "similarity_boost": 0.75, "use_speaker_boost": true}}
		resp, b := ss.elDo("POST", path, ss.key, body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype {
			t.Fatalf("%d %+v: %d %s: %.200s", i, tc, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if resp.Header.Get("X-Billing-Remaining") == "" {
			t.Errorf("%d: headers %v", i, resp.Header)
		}
		var got float64
		switch {
		case tc.width > 0:
			f := codec.S16LE
			if tc.ctype == "audio/basic" {
				f = codec.MuLaw
			} else if tc.width == 1 {
				f = codec.ALaw
			}
			s, err := codec.DecodePCM(f, b)
			if err != nil || rms(s) < 0.05 {
				t.Fatalf("%d: %d bytes, rms %.3f, %v", i, len(b), rms(s), err)
			}
			got = float64(len(s)) / float64(tc.rate)
		case tc.ctype == "audio/wav":
			rate, s := wavInfo(t, b)
			if rate != tc.rate {
				t.Fatalf("wav at %d Hz", rate)
			}
			got = float64(len(s)) / float64(rate)
		case tc.ctype == "audio/ogg":
			if string(b[:4]) != "OggS" {
				t.Fatalf("opus: % x", b[:min(len(b), 8)])
			}
			continue
		case tc.ctype == "audio/mpeg":
			n, rate, _ := mp3Samples(t, b)
			if rate != tc.rate {
				t.Fatalf("mp3 at %d Hz", rate)
			}
			got = float64(n-compatMP3Delay) / float64(rate)
		}
		if seconds == 0 {
			seconds = got
		}
		// Resampling keeps the duration to within a few samples; MP3 to
		// within a frame of its encoder's delay and padding.
		if d := got - seconds; d > 0.03 || d < -0.03 {
			t.Errorf("%d %s: %.3f s, pcm_24000 %.3f s", i, tc.format, got, seconds)
		}
	}
}

// alignment is the HTTP endpoints' alignment object.
type alignment struct {
	Characters []string  `json:"characters"`
	Starts     []float64 `json:"character_start_times_seconds"`
	Ends       []float64 `json:"character_end_times_seconds"`
}

type timestamped struct {
	Audio      string     `json:"audio_base64"`
	Alignment  *alignment `json:"alignment"`
	Normalized *alignment `json:"normalized_alignment"`
}

// TestElevenLabsTimestamps: with-timestamps and its streamed form carry the
// audio of the format and characters that join to the text, whose times
// never go back and end within the audio.
func TestElevenLabsTimestamps(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	text := "Hello there, world! Ça va? The dialect's timestamps — one more sentence."
	body := map[string]any{"text": text, "voice_settings": map[string]any{"speed": 1.25}}
	check := func(name string, parts []timestamped) {
		t.Helper()
		var audio []byte
		var chars []string
		var starts, ends []float64
		for _, p := range parts {
			a, err := base64.StdEncoding.DecodeString(p.Audio)
			if err != nil || p.Alignment == nil || p.Normalized == nil {
				t.Fatalf("%s: part %+v: %v", name, p, err)
			}
			audio = append(audio, a...)
			al := p.Alignment
			if len(al.Starts) != len(al.Characters) || len(al.Ends) != len(al.Characters) {
				t.Fatalf("%s: lengths %d %d %d", name, len(al.Characters), len(al.Starts), len(al.Ends))
			}
			chars, starts, ends = append(chars, al.Characters...), append(starts, al.Starts...), append(ends, al.Ends...)
		}
		if got := strings.Join(chars, ""); got != text {
			t.Fatalf("%s: characters join to %q", name, got)
		}
		s, err := codec.DecodePCM(codec.S16LE, audio)
		if err != nil || rms(s) < 0.05 {
			t.Fatalf("%s: audio %d bytes: %v", name, len(audio), err)
		}
		total := float64(len(s)) / 22050
		last := 0.0
		for i := range chars {
			if starts[i] < last || ends[i] < starts[i] || ends[i] > total+0.001 {
				t.Fatalf("%s: character %d %q at %.3f-%.3f after %.3f (audio %.3f s)", name, i, chars[i], starts[i], ends[i], last, total)
			}
			last = starts[i]
		}
		if ends[len(ends)-1] < total*0.9 {
			t.Errorf("%s: last character ends at %.3f of %.3f s", name, ends[len(ends)-1], total)
		}
	}

	resp, b := ss.elDo("POST", "/text-to-speech/"+ss.voice+"/with-timestamps?output_format=pcm_22050", ss.key, body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var one timestamped
	if err := json.Unmarshal(b, &one); err != nil {
		t.Fatal(err)
	}
	check("with-timestamps", []timestamped{one})

	resp, b = ss.elDo("POST", "/text-to-speech/"+ss.voice+"/stream/with-timestamps?output_format=pcm_22050", ss.key, body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %.200s", resp.StatusCode, b)
	}
	var parts []timestamped
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p timestamped
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		parts = append(parts, p)
	}
	if len(parts) < 3 {
		t.Errorf("%d lines: not streamed in pieces", len(parts))
	}
	check("stream/with-timestamps", parts)
}

// TestElevenLabsErrors: the vendor's shape, with voicesvc's code, on every
// refusal: credentials, fields, formats, voices, and unknown paths under
// the base.
func TestElevenLabsErrors(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	tts := "/text-to-speech/" + ss.voice
	ok := map[string]any{"text": "Hello."}

	resp, b := ss.elDo("POST", tts, "", ok)
	checkELError(t, resp, b, 401, "invalid_api_key", "")
	resp, b = ss.elDo("POST", tts, "vsk_wrong", ok)
	checkELError(t, resp, b, 401, "invalid_api_key", "")
	// X-API-Key is voicesvc's own header, not the vendor's.
	resp, b = ss.elDo("POST", tts, "", ok, "X-API-Key", ss.key)
	checkELError(t, resp, b, 401, "invalid_api_key", "")

	for i, tc := range []struct {
		path     string
		body     any
		status   int
		vendor   string
		code     string
		param    string
		contains string
	}{
		{tts, map[string]any{}, 400, "text_required", "text_required", "text", ""},
		{tts, map[string]any{"text": 5}, 400, "invalid_request", "invalid_request", "text", ""},
		{tts, map[string]any{"text": strings.Repeat("a", 10_001)}, 400, "max_character_limit_exceeded", "text_too_long", "text", ""},
		{tts + "?output_format=aac_44100", ok, 400, "invalid_output_format", "invalid_output_format", "output_format", "pcm_16000"},
		{tts, map[string]any{"text": "x", "voice_settings": map[string]any{"speed": 9}}, 400, "invalid_speed", "invalid_speed", "voice_settings.speed", ""},
		{tts, map[string]any{"text": "x", "voice_settings": "fast"}, 400, "invalid_request", "invalid_request", "voice_settings", ""},
		{tts, map[string]any{"text": "x", "language_code": "not a tag"}, 400, "invalid_language", "invalid_language", "language_code", ""},
		{"/text-to-speech/21m00Tcm4TlvDq8ikWAM", ok, 404, "voice_not_found", "not_found", "", ""},
		{"/text-to-speech/" + ss.voice + "/nothing", ok, 404, "not_found", "not_found", "", ""},
		{"/no-such-route", nil, 404, "not_found", "not_found", "", ""},
	} {
		method := "POST"
		if tc.body == nil {
			method = "GET"
		}
		resp, b := ss.elDo(method, tc.path, ss.key, tc.body)
		d := checkELError(t, resp, b, tc.status, tc.vendor, tc.code)
		if p, _ := d["param"].(string); p != tc.param {
			t.Errorf("%d: param %q, want %q", i, p, tc.param)
		}
		if m, _ := d["message"].(string); !strings.Contains(m, tc.contains) {
			t.Errorf("%d: message %q lacks %q", i, m, tc.contains)
		}
	}

	// A key without the tts scope: 403 naming it.
	key := ss.newKey(ss.ws.ID, []string{control.ScopeVoicesRead}, 0, false)
	resp, b = ss.elDo("POST", tts, key, ok)
	checkELError(t, resp, b, 403, "missing_permissions", "insufficient_scope")
	// ... which still lists voices.
	if resp, b = ss.elDo("GET", "/voices", key, nil); resp.StatusCode != 200 {
		t.Errorf("voices with voices:read: %d %s", resp.StatusCode, b)
	}
}

// TestElevenLabsLimits: plan refusals in the vendor's shape with their
// status and Retry-After; a plan without streaming answered whole; an
// access token where a browser puts its single-use token; the
// subscription counts the characters synthesized.
func TestElevenLabsLimits(t *testing.T) {
	ss := newSynthServer(t, synthOpts{plan: "free"})
	tts := "/text-to-speech/" + ss.voice + "?output_format=pcm_16000"
	text := "Hello there."
	resp, b := ss.elDo("POST", tts, ss.key, map[string]any{"text": text})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	resp, b = ss.elDo("GET", "/user/subscription", ss.key, nil)
	var sub map[string]any
	if err := json.Unmarshal(b, &sub); resp.StatusCode != 200 || err != nil {
		t.Fatalf("subscription: %d %s", resp.StatusCode, b)
	}
	if sub["character_count"] != float64(len(text)) || sub["character_limit"] != float64(10_000) || sub["tier"] != "free" {
		t.Errorf("subscription %s", b)
	}
	// Free: 2 requests per second; the third within the second is refused.
	var last *http.Response
	for range 3 {
		last, b = ss.elDo("POST", tts, ss.key, map[string]any{"text": text})
	}
	checkELError(t, last, b, 429, "rate_limit_exceeded", "rate_limited")
	if last.Header.Get("Retry-After") == "" {
		t.Errorf("429 headers %v", last.Header)
	}

	// Out of characters (enforce, no allowance left): 402 quota_exceeded.
	zero := int64(0)
	enforce := control.BillingEnforce
	w := &control.Workspace{Name: "broke", Plan: "pro", Allowance: &zero, Billing: enforce}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key := ss.newKey(w.ID, nil, 0, false)
	resp, b = ss.elDo("POST", "/text-to-speech/"+ss.readyVoice(w.ID, "en"), key, map[string]any{"text": text})
	checkELError(t, resp, b, 402, "quota_exceeded", "quota_exhausted")

	// Without the streaming feature: one response with a length.
	off := false
	w = &control.Workspace{Name: "nostream", Plan: "pro", Streaming: &off}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key = ss.newKey(w.ID, nil, 0, false)
	resp, b = ss.elDo("POST", "/text-to-speech/"+ss.readyVoice(w.ID, "en")+"/stream?output_format=pcm_16000", key, map[string]any{"text": text})
	if resp.StatusCode != 200 || len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(b)) || len(b) == 0 {
		t.Fatalf("buffered: %d %v length %d: %.100s", resp.StatusCode, resp.TransferEncoding, resp.ContentLength, b)
	}

	// An access token in xi-api-key (a browser's single-use token) and as a
	// bearer: single use, so the second is refused.
	tok := mintToken(t, ss.testServer, key)
	resp, b = ss.elDo("POST", "/text-to-speech/"+ss.readyVoice(w.ID, "en")+"?output_format=pcm_16000", tok, map[string]any{"text": text})
	if resp.StatusCode != 200 || len(b) == 0 {
		t.Fatalf("token: %d %.200s", resp.StatusCode, b)
	}
	resp, b = ss.elDo("POST", "/text-to-speech/"+ss.voice, "", map[string]any{"text": text}, "Authorization", "Bearer "+tok)
	checkELError(t, resp, b, 401, "invalid_api_key", "token_invalid")
}

// mintToken makes a single-use access token with key.
func mintToken(t *testing.T, ts *testServer, key string) string {
	t.Helper()
	r := ts.do("POST", "/tokens", key, map[string]any{"ttl_seconds": 60})
	d := r.data(t, 201)
	tok, _ := d["token"].(string)
	if tok == "" {
		t.Fatalf("token: %v", d)
	}
	return tok
}

// TestElevenLabsLists: voices (own "cloned", public "premade", under every
// name a voice_id takes), the model, with the languages of the engines.
func TestElevenLabsLists(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	r := ss.do("PUT", "/voices/"+ss.voice+"/aliases", ss.key, map[string]any{"aliases": []string{"21m00Tcm4TlvDq8ikWAM"}})
	r.data(t, 200)
	resp, b := ss.elDo("GET", "/voices", ss.key, nil)
	var voices struct {
		Voices []struct {
			ID       string            `json:"voice_id"`
			Name     string            `json:"name"`
			Category string            `json:"category"`
			Labels   map[string]string `json:"labels"`
		} `json:"voices"`
	}
	if err := json.Unmarshal(b, &voices); resp.StatusCode != 200 || err != nil {
		t.Fatalf("voices: %d %s", resp.StatusCode, b)
	}
	found := map[string]string{}
	for _, v := range voices.Voices {
		found[v.ID] = v.Category
		if v.Labels == nil || v.Name == "" {
			t.Errorf("voice %+v", v)
		}
	}
	alias := ss.srv.engine.Catalog()[0].Alias
	if found[ss.voice] != "cloned" || found["21m00Tcm4TlvDq8ikWAM"] != "cloned" || found[alias] != "premade" {
		t.Errorf("voices %v", found)
	}
	// The workspace alias speaks.
	if resp, b := ss.elDo("POST", "/text-to-speech/21m00Tcm4TlvDq8ikWAM?output_format=pcm_16000", ss.key,
		map[string]any{"text": "Hi."}); resp.StatusCode != 200 || len(b) == 0 {
		t.Errorf("alias: %d %.200s", resp.StatusCode, b)
	}

	resp, b = ss.elDo("GET", "/models", ss.key, nil)
	var models []map[string]any
	if err := json.Unmarshal(b, &models); resp.StatusCode != 200 || err != nil || len(models) != 1 {
		t.Fatalf("models: %d %s", resp.StatusCode, b)
	}
	if models[0]["model_id"] != "service-v1" || models[0]["can_do_text_to_speech"] != true {
		t.Errorf("model %v", models[0])
	}
	if langs, _ := models[0]["languages"].([]any); len(langs) == 0 {
		t.Errorf("model languages %v", models[0]["languages"])
	}
}
