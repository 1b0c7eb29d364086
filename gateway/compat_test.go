package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hajimehoshi/go-mp3"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// compatDo posts body to the compat endpoint with headers (name, value
// pairs) and returns the response with its body read.
func (ss *synthServer) compatDo(body any, headers ...string) (*http.Response, []byte) {
	ss.t.Helper()
	resp := ss.post("/compat/audio/speech", "", body, headers...)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		ss.t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// compatHeadersOnly sends the headers of a speech request whose body would
// be length bytes, sends no body, and reads the answer: a refusal by size
// comes before the body, and a client still writing a large one can have
// its connection reset before it reads that answer (as headersOnly).
func (ss *synthServer) compatHeadersOnly(length int) (*http.Response, []byte) {
	ss.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ss.base, "http://"))
	if err != nil {
		ss.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s/compat/audio/speech HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", APIRoot, ss.key, length)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		ss.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// checkCompatError checks the third-party error shape and returns it.
func checkCompatError(t *testing.T, resp *http.Response, b []byte, status int, typ, code, param string) map[string]any {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", resp.StatusCode, status, b)
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || len(body.Error) != 4 {
		t.Fatalf("not {error: {message, type, param, code}}: %s", b)
	}
	e := body.Error
	if m, _ := e["message"].(string); m == "" || e["type"] != typ {
		t.Errorf("message/type: %s (want type %s)", b, typ)
	}
	if want := any(code); code == "" && e["code"] != nil || code != "" && e["code"] != want {
		t.Errorf("code %v, want %q: %s", e["code"], code, b)
	}
	if want := any(param); param == "" && e["param"] != nil || param != "" && e["param"] != want {
		t.Errorf("param %v, want %q: %s", e["param"], param, b)
	}
	if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", resp.Header)
	}
	return e
}

// mp3Samples decodes with go-mp3: samples per channel, rate and RMS.
func mp3Samples(t *testing.T, b []byte) (int, int, float64) {
	t.Helper()
	d, err := mp3.NewDecoder(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("go-mp3: %v", err)
	}
	pcm, err := io.ReadAll(d)
	if err != nil {
		t.Fatalf("go-mp3: %v", err)
	}
	var sum float64
	for i := 0; i+1 < len(pcm); i += 4 { // stereo s16le: left channel
		x := float64(int16(binary.LittleEndian.Uint16(pcm[i:]))) / 32768
		sum += x * x
	}
	n := len(pcm) / 4
	return n, d.SampleRate(), sum / float64(max(n, 1))
}

// LAME's encoder delay plus the decoder's, and the MPEG-2 frame (24 kHz).
const (
	compatMP3Delay = 576 + 529
	compatMP3Frame = 576
)

// TestCompatFormats: every format, through Bearer and X-API-Key, by id and
// by alias, with the documented and a foreign model name; mp3 decodes with
// go-mp3 to the pcm duration (plus LAME's fixed delay) within one frame
// and is not silent; streamed responses are chunked.
func TestCompatFormats(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	alias := ss.srv.engine.Catalog()[0].Alias
	text := "Hello there. This is the compatible endpoint."
	var pcmSamples int
	for i, tc := range []struct {
		format, model, voice, ctype string
		auth                        []string
	}{
		{"pcm", "service-v1", ss.voice, "audio/pcm", bearerHdr(ss.key)},
		{"wav", "tts-1", alias, "audio/wav", []string{"X-API-Key", ss.key}},
		{"mp3", "gpt-4o-mini-tts", ss.voice, "audio/mpeg", bearerHdr(ss.key)},
		{"", "service-v1", alias, "audio/mpeg", []string{"X-API-Key", ss.key}},
	} {
		body := map[string]any{"model": tc.model, "voice": tc.voice, "input": text,
			"speed": 1.5, "instructions": "calm", "stream_format": "audio", "unknown": []int{1}}
		if tc.format != "" {
			body["response_format"] = tc.format
		}
		if !codec.MP3Available && tc.ctype == "audio/mpeg" {
			continue
		}
		resp, b := ss.compatDo(body, tc.auth...)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tc.ctype {
			t.Fatalf("%d %+v: %d %s: %.200s", i, tc, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
			t.Errorf("%d: not streamed: %v", i, resp.TransferEncoding)
		}
		if resp.Header.Get("X-Request-Id") == "" || resp.Header.Get("X-Billing-Remaining") == "" ||
			!strings.Contains(resp.Header.Get("RateLimit"), `"concurrency";r=`) {
			t.Errorf("%d: headers %v", i, resp.Header)
		}
		switch tc.ctype {
		case "audio/pcm":
			s, err := codec.DecodePCM(codec.S16LE, b)
			if err != nil || len(s) == 0 || rms(s) < 0.05 || resp.Header.Get("X-Sample-Rate") != "24000" {
				t.Fatalf("pcm: %d bytes, rms %.3f, %v", len(b), rms(s), err)
			}
			pcmSamples = len(s)
		case "audio/wav":
			if len(b) < 44 || string(b[:4]) != "RIFF" || string(b[36:40]) != "data" ||
				binary.LittleEndian.Uint32(b[24:]) != 24000 || (len(b)-44)/2 != pcmSamples {
				t.Fatalf("wav: %d bytes, header % x, want %d samples", len(b), b[:min(len(b), 44)], pcmSamples)
			}
		case "audio/mpeg":
			n, rate, ms := mp3Samples(t, b)
			want := pcmSamples + compatMP3Delay
			if rate != 24000 || n-want > compatMP3Frame || want-n > compatMP3Frame || ms < 0.05*0.05 {
				t.Fatalf("mp3: %d samples at %d Hz (want %d ± %d), mean square %.4f", n, rate, want, compatMP3Frame, ms)
			}
			t.Logf("mp3: %d bytes, %d samples, want %d", len(b), n, want)
		}
	}
}

// TestCompatErrors: the third-party error shape with section 7 statuses.
func TestCompatErrors(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	ok := map[string]any{"model": "tts-1", "voice": ss.voice, "input": "Hi.", "response_format": "pcm"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range ok {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	auth := bearerHdr(ss.key)
	tok := ss.mintToken(ss.key, map[string]any{})
	for _, tc := range []struct {
		name             string
		body             any
		hdr              []string
		status           int
		typ, code, param string
		messageContains  string
	}{
		{name: "unknown alias", body: with("voice", "alloy"), hdr: auth, status: 404, typ: "invalid_request_error", code: "not_found", param: "voice", messageContains: `"alloy"`},
		{name: "unknown id", body: with("voice", control.NewID()), hdr: auth, status: 404, typ: "invalid_request_error", code: "not_found", param: "voice"},
		{name: "too long", body: with("input", strings.Repeat("a", 10_001)), hdr: auth, status: 400, typ: "invalid_request_error", code: "text_too_long", param: "input"},
		{name: "no input", body: with("input", nil), hdr: auth, status: 400, typ: "invalid_request_error", code: "text_required", param: "input"},
		{name: "no model", body: with("model", nil), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "model"},
		{name: "model type", body: with("model", 3), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "model"},
		{name: "no voice", body: with("voice", nil), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "voice"},
		{name: "format", body: with("response_format", "aac"), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_output_format", param: "response_format", messageContains: "mp3, opus, flac, wav, pcm"},
		{name: "format case", body: with("response_format", "OPUS"), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_output_format", param: "response_format"},
		{name: "speed high", body: with("speed", 4.5), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_speed", param: "speed", messageContains: "0.25 to 4"},
		{name: "speed low", body: with("speed", 0.2), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_speed", param: "speed"},
		{name: "speed string", body: with("speed", "1.0"), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_speed", param: "speed"},
		{name: "speed bool", body: with("speed", true), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_speed", param: "speed"},
		{name: "stream_format", body: with("stream_format", "chunks"), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "stream_format", messageContains: `"sse"`},
		{name: "stream_format empty", body: with("stream_format", ""), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "stream_format"},
		{name: "stream_format type", body: with("stream_format", 1), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_request", param: "stream_format"},
		{name: "language", body: with("language", "xx"), hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_language", param: "language"},
		{name: "json", body: "[1]", hdr: auth, status: 400, typ: "invalid_request_error", code: "invalid_json"},
		{name: "too large", body: `{"input":"` + strings.Repeat("a", 300<<10) + `"}`, hdr: auth, status: 413, typ: "invalid_request_error", code: "payload_too_large"},
		{name: "no key", body: ok, status: 401, typ: "authentication_error"},
		{name: "access token", body: ok, hdr: bearerHdr(tok), status: 401, typ: "authentication_error"},
		{name: "session-like token", body: ok, hdr: bearerHdr("eyJhbGciOi.x.y"), status: 401, typ: "authentication_error"},
		{name: "scope", body: ok, hdr: bearerHdr(ss.newKey(ss.ws.ID, []string{"voices:read"}, 0, false)), status: 403, typ: "permission_error", code: "insufficient_scope"},
	} {
		var resp *http.Response
		var b []byte
		if s, isStr := tc.body.(string); isStr && len(s) > 64<<10 {
			resp, b = ss.compatHeadersOnly(len(s))
		} else if isStr {
			req, _ := http.NewRequest("POST", ss.base+APIRoot+"/compat/audio/speech", strings.NewReader(s))
			req.Header.Set("Authorization", "Bearer "+ss.key)
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(r.Body)
			r.Body.Close()
			resp = r
		} else {
			resp, b = ss.compatDo(tc.body, tc.hdr...)
		}
		t.Run(tc.name, func(t *testing.T) {
			e := checkCompatError(t, resp, b, tc.status, tc.typ, tc.code, tc.param)
			if m, _ := e["message"].(string); !strings.Contains(m, tc.messageContains) {
				t.Errorf("message %q lacks %q", m, tc.messageContains)
			}
		})
	}
	// The token was refused, not consumed: it still works on speak.
	r := ss.post("/voices/"+ss.voice+"/speak", "", map[string]any{"text": "Hi."}, bearerHdr(tok)...)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("token after compat refusal: speak %d", r.StatusCode)
	}
	// Unmatched paths under /compat/ answer in the same shape.
	resp, b := ss.compatDo(ok, bearerHdr(ss.key)...)
	if resp.StatusCode != 200 {
		t.Fatalf("ok body: %d %s", resp.StatusCode, b)
	}
	req, _ := http.NewRequest("GET", ss.base+APIRoot+"/compat/nothing", nil)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(r.Body)
	r.Body.Close()
	checkCompatError(t, r, b, 404, "invalid_request_error", "not_found", "")
}

// TestCompatLimits: requests per second (429 with Retry-After, in the
// third-party shape), metering with X-Billing-Remaining, and a plan
// without streaming answered whole (a WAV with its true sizes).
func TestCompatLimits(t *testing.T) {
	ss := newSynthServer(t, synthOpts{plan: "free"})
	body := map[string]any{"model": "tts-1", "voice": ss.voice, "input": "Hello there.", "response_format": "wav"}
	resp, b := ss.compatDo(body, bearerHdr(ss.key)...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	chars := int64(len("Hello there."))
	if got := resp.Header.Get("X-Billing-Remaining"); got != strconv.FormatInt(10_000-chars, 10) {
		t.Errorf("X-Billing-Remaining %q, want %d", got, 10_000-chars)
	}
	if p := resp.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"concurrency";q=2`) || !strings.Contains(p, `"rps";q=2`) {
		t.Errorf("RateLimit-Policy %q", p)
	}
	// Free: 2 requests per second; the third within the second is refused.
	var last *http.Response
	for range 3 {
		last, b = ss.compatDo(map[string]any{}, bearerHdr(ss.key)...)
	}
	checkCompatError(t, last, b, 429, "rate_limit_error", "rate_limited", "")
	if last.Header.Get("Retry-After") == "" || !strings.Contains(last.Header.Get("RateLimit"), `"rps";r=0`) {
		t.Errorf("429 headers %v", last.Header)
	}

	// Without the streaming feature: one response with a length.
	off := false
	w := &control.Workspace{Name: "nostream", Plan: "pro", Streaming: &off}
	if err := ss.store.CreateWorkspace(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	key := ss.newKey(w.ID, nil, 0, false)
	body["voice"] = ss.readyVoice(w.ID, "en")
	resp, b = ss.compatDo(body, "X-API-Key", key)
	if resp.StatusCode != 200 || len(resp.TransferEncoding) != 0 || resp.ContentLength != int64(len(b)) {
		t.Fatalf("buffered: %d %v length %d: %.100s", resp.StatusCode, resp.TransferEncoding, resp.ContentLength, b)
	}
	if rate, s := wavInfo(t, b); rate != 24000 || rms(s) < 0.05 {
		t.Errorf("buffered wav: %d Hz, rms %.3f", rate, rms(s))
	}
}

// sentenceGate holds the last chunk of the first sentence until the client
// has seen the response's first bytes (or 10 s passed), and records which
// came first: an ordering, not a timing threshold.
type sentenceGate struct {
	engine.Engine
	firstByte   chan struct{}
	bytesBefore bool
	done        time.Time // when the whole synthesis ended
}

func (g *sentenceGate) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	err := g.Engine.Synthesize(ctx, req, func(c engine.Chunk) error {
		if c.Sentence == 0 && c.Last {
			select {
			case <-g.firstByte:
				g.bytesBefore = true
			case <-time.After(10 * time.Second):
			}
		}
		return emit(c)
	})
	g.done = time.Now()
	return err
}

// TestCompatStreamedMP3FirstBytes: a streamed mp3 response of a
// multi-sentence text delivers its first bytes before the engine has
// finished the first sentence, so before the whole text is synthesized.
func TestCompatStreamedMP3FirstBytes(t *testing.T) {
	if !codec.MP3Available {
		t.Skip("built without MP3")
	}
	gate := &sentenceGate{Engine: reference.New(reference.Options{RTF: 0.05}), firstByte: make(chan struct{})}
	ss := newSynthServer(t, synthOpts{eng: gate})
	text := "This first sentence is long enough for several frames. Then a second one follows. And a third."
	start := time.Now()
	resp := ss.post("/compat/audio/speech", "", map[string]any{"model": "service-v1", "voice": ss.voice, "input": text},
		bearerHdr(ss.key)...)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var first [1]byte
	if _, err := io.ReadFull(resp.Body, first[:]); err != nil {
		t.Fatal(err)
	}
	ttfb := time.Since(start)
	close(gate.firstByte)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	if !gate.bytesBefore {
		t.Fatal("no bytes reached the client before the first sentence was synthesized")
	}
	if ttfb >= gate.done.Sub(start) || ttfb >= total {
		t.Errorf("ttfb %v, synthesis done at %v, total %v", ttfb, gate.done.Sub(start), total)
	}
	if n, _, _ := mp3Samples(t, append(first[:], rest...)); n == 0 {
		t.Error("no audio")
	}
	t.Logf("ttfb %v, synthesis done %v, total %v", ttfb, gate.done.Sub(start), total)
}
