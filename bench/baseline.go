package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/loopback"
)

// The baseline (`voicesvc bench baseline`) answers "what does the gateway
// add?" for the four transports of a voicesvc itself. It first records, over
// one request of each transport, the bytes voicesvc answers (status headers
// and body of speak, the SSE stream, the compat body, the WebSocket frames
// after a task_start), then starts a bare fasthttp server on loopback, in a
// process of its own (bareproc.go), that answers every request with those
// recorded bytes at once.
// The same client then measures the bare server and voicesvc in turn,
// transport by transport, level by level and round by round (the order of
// the two flips every round), so that both see the same machine. Run
// voicesvc with the reference engine unpaced (`--engine reference
// --reference-rtf 0`): its first chunk is ready at once, so what voicesvc
// adds over the bare server is the gateway's own time.

// barePrefix names the bare server's results: bare-speak, bare-sse, ...
const barePrefix = "bare-"

// wsCaptureID is the context id of the recorded WebSocket task; the bare
// server puts each task's own id in its place.
const wsCaptureID = "baseline-capture"

// maxCapture bounds a recorded answer; the suite's text gives about 64 KiB.
const maxCapture = 16 << 20

// answerHeaders are the response headers of voicesvc's audio answers that
// the bare server repeats (its own date, server and framing headers aside).
var answerHeaders = []string{"Content-Type", "X-Sample-Rate", "X-Audio-Format", "X-Channels",
	"Cache-Control", "X-Accel-Buffering"}

// recordedAnswer is one HTTP answer of voicesvc.
type recordedAnswer struct {
	Header [][2]string `json:"header"`
	Body   []byte      `json:"body"`
}

type recordedFrame struct {
	Binary bool   `json:"binary,omitempty"`
	Data   []byte `json:"data"`
}

// recording is what voicesvc answered for each transport; the bare server
// process reads it as JSON.
type recording struct {
	Speak  recordedAnswer  `json:"speak"`
	SSE    recordedAnswer  `json:"sse"`
	Compat recordedAnswer  `json:"compat"`
	WS     []recordedFrame `json:"ws"` // from task_started to task_done
}

// scenarioFormat is a scenario's output format: format when given, else
// s16le (compat: pcm).
func scenarioFormat(name, format string) string {
	switch {
	case format != "":
		return format
	case name == "compat":
		return "pcm"
	}
	return "s16le"
}

// record asks voicesvc once per transport and keeps its answers.
func record(ctx context.Context, t *target, format string) (*recording, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var rec recording
	body := func(name string) map[string]any {
		return map[string]any{"text": t.text, "output_format": scenarioFormat(name, format), "sample_rate": t.sampleRate}
	}
	reqs := []struct {
		name   string
		path   string
		body   map[string]any
		bearer bool
		into   *recordedAnswer
	}{
		{"speak", "/voices/" + t.voiceID + "/speak", body("speak"), false, &rec.Speak},
		{"sse", "/voices/" + t.voiceID + "/stream", body("sse"), false, &rec.SSE},
		{"compat", "/compat/audio/speech", map[string]any{"model": "service-v1", "voice": t.voiceRef,
			"input": t.text, "response_format": scenarioFormat("compat", format)}, true, &rec.Compat},
	}
	for _, r := range reqs {
		req, err := t.postJSON(ctx, r.path, r.body, r.bearer)
		if err != nil {
			return nil, err
		}
		if r.name == "sse" {
			req.Header.Set("Accept", "text/event-stream")
		}
		if *r.into, err = recordHTTP(t.client, req); err != nil {
			return nil, fmt.Errorf("record %s: %w", r.name, err)
		}
	}
	var err error
	if rec.WS, err = recordWS(ctx, t, scenarioFormat("ws", format)); err != nil {
		return nil, fmt.Errorf("record ws: %w", err)
	}
	return &rec, nil
}

func recordHTTP(client *http.Client, req *http.Request) (recordedAnswer, error) {
	resp, err := client.Do(req)
	if err != nil {
		return recordedAnswer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return recordedAnswer{}, fmt.Errorf("status %s", statusError(resp))
	}
	var a recordedAnswer
	for _, h := range answerHeaders {
		if v := resp.Header.Get(h); v != "" {
			a.Header = append(a.Header, [2]string{h, v})
		}
	}
	a.Body, err = io.ReadAll(io.LimitReader(resp.Body, maxCapture))
	if err == nil && len(a.Body) == 0 {
		err = fmt.Errorf("empty answer")
	}
	return a, err
}

// recordWS runs one whole-sentence task on a session of its own and keeps
// every frame from task_started to task_done.
func recordWS(ctx context.Context, t *target, format string) ([]recordedFrame, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, NetDialContext: unpacedDial}
	h := http.Header{}
	h.Set("X-API-Key", t.key)
	c, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(t.apiRoot, "http")+"/stream", h)
	if err != nil {
		if resp != nil {
			defer resp.Body.Close()
			return nil, fmt.Errorf("handshake %s", statusError(resp))
		}
		return nil, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetReadDeadline(dl)
		_ = c.SetWriteDeadline(dl)
	}
	if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": wsCaptureID, "voice_id": t.voiceID,
		"text": t.text, "finalize": true, "output_format": format, "sample_rate": t.sampleRate}); err != nil {
		return nil, err
	}
	var frames []recordedFrame
	size := 0
	for size < maxCapture {
		mt, data, err := c.ReadMessage()
		if err != nil {
			return nil, err
		}
		size += len(data)
		if mt == websocket.BinaryMessage {
			frames = append(frames, recordedFrame{Binary: true, Data: data})
			continue
		}
		var m wsMsg
		if json.Unmarshal(data, &m) != nil || m.ContextID != wsCaptureID {
			continue // session-level messages are not the task's answer
		}
		frames = append(frames, recordedFrame{Data: data})
		switch m.Type {
		case "task_done":
			_ = c.WriteJSON(map[string]any{"type": "session_end"})
			return frames, nil
		case "task_failed", "error", "task_cancelled":
			return nil, fmt.Errorf("%s %s", m.Type, m.Code)
		}
	}
	return nil, fmt.Errorf("answer over %d bytes", maxCapture)
}

// bareServer is a fasthttp server that replays a recording: the request
// is read by fasthttp and otherwise ignored.
type bareServer struct {
	rec *recording
	srv *fasthttp.Server
	url string
	up  websocket.FastHTTPUpgrader
	wg  sync.WaitGroup
}

func startBare(rec *recording) (*bareServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &bareServer{rec: rec, url: "http://" + ln.Addr().String()}
	b.up = websocket.FastHTTPUpgrader{ReadBufferSize: 4 << 10, WriteBufferSize: 16 << 10,
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true }}
	b.srv = &fasthttp.Server{Handler: b.handle, ReadTimeout: time.Minute, WriteTimeout: time.Minute,
		IdleTimeout: time.Minute}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		// Loopback unpaced, as voicesvc's own listener does.
		_ = b.srv.Serve(loopback.Listener(ln))
	}()
	return b, nil
}

func (b *bareServer) close() {
	_ = b.srv.Shutdown()
	b.wg.Wait()
}

func (b *bareServer) handle(ctx *fasthttp.RequestCtx) {
	path := string(ctx.Path())
	switch {
	case ctx.IsGet() && strings.HasSuffix(path, "/stream"):
		_ = b.up.Upgrade(ctx, b.session)
	case strings.HasSuffix(path, "/speak"):
		replayAnswer(ctx, &b.rec.Speak)
	case strings.HasSuffix(path, "/stream"):
		replayAnswer(ctx, &b.rec.SSE)
	case strings.HasSuffix(path, "/audio/speech"):
		replayAnswer(ctx, &b.rec.Compat)
	default:
		ctx.SetStatusCode(fasthttp.StatusNotFound)
	}
}

// replayAnswer streams the recorded body chunked, as voicesvc streams its
// audio answers.
func replayAnswer(ctx *fasthttp.RequestCtx, a *recordedAnswer) {
	for _, h := range a.Header {
		ctx.Response.Header.Set(h[0], h[1])
	}
	ctx.SetBodyStream(bytes.NewReader(a.Body), -1)
}

// session answers each task_start with the recorded frames under the task's
// context id, all in one write, and session_end with session_ended; one
// goroutine, so the frames of two tasks never interleave.
//
// The first audio pair in a write of its own, the rest in one more: the
// least a server can do that streams audio (when this server shared the
// client's process, writing the rest pair by pair kept the client's reader
// from the first pair: bare ws TTFB p50 0.24 ms at one stream, against 0.06
// ms with one write).
func (b *bareServer) session(c *websocket.Conn) {
	defer c.Close()
	conn := c.UnderlyingConn()
	capID := []byte(strconv.Quote(wsCaptureID))
	var out []byte
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		var m struct {
			Type      string `json:"type"`
			ContextID string `json:"context_id"`
		}
		if json.Unmarshal(data, &m) != nil {
			return
		}
		out = out[:0]
		switch m.Type {
		case "task_start":
			id := []byte(strconv.Quote(m.ContextID))
			first := true
			for _, f := range b.rec.WS {
				out = appendUnitFrame(out, f, capID, id)
				if f.Binary && first {
					first = false
					if _, err := conn.Write(out); err != nil {
						return
					}
					out = out[:0]
				}
			}
		case "session_end":
			_, _ = conn.Write(appendFrame(out, websocket.TextMessage, []byte(`{"type":"session_ended","reason":"client_request"}`)))
			return
		default:
			continue
		}
		if _, err := conn.Write(out); err != nil {
			return
		}
	}
}

// appendUnitFrame appends a recorded frame, a text frame with the task's
// context id in place of the recorded one.
func appendUnitFrame(dst []byte, f recordedFrame, capID, id []byte) []byte {
	if f.Binary {
		return appendFrame(dst, websocket.BinaryMessage, f.Data)
	}
	return appendFrame(dst, websocket.TextMessage, bytes.ReplaceAll(f.Data, capID, id))
}

// appendFrame appends one unmasked, unfragmented server frame (RFC 6455
// section 5.2).
func appendFrame(dst []byte, opcode int, payload []byte) []byte {
	dst = append(dst, 0x80|byte(opcode))
	switch n := len(payload); {
	case n < 126:
		dst = append(dst, byte(n))
	case n <= 0xffff:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(dst, payload...)
}

// Baseline runs the baseline (see the top of this file) and returns the
// run: for each level, round and transport one result of the bare server
// (scenario bare-<transport>) and one of voicesvc (<transport>).
// o.Sweep gives the levels (default 1 and 64), o.Rounds the rounds
// (default 3).
func Baseline(ctx context.Context, o Options) (*Run, error) {
	o.Target = "voicesvc"
	o.Scenarios = Scenarios
	if err := o.defaults(); err != nil {
		return nil, err
	}
	levels := o.Sweep
	if len(levels) == 0 {
		levels = []float64{1, 64}
	}
	rounds := max(o.Rounds, 1)
	maxConns := 1
	for _, l := range levels {
		maxConns = max(maxConns, int(l))
	}
	t := &target{
		base: o.BaseURL, apiRoot: o.BaseURL + apiPath, key: o.APIKey,
		client: newHTTPClient(2 * maxConns), text: o.Text, sampleRate: o.SampleRate,
	}
	defer t.client.CloseIdleConnections()
	run := &Run{
		Tool: "voicesvc-bench", Version: 1, StartedAt: time.Now().UTC(), BaseURL: o.BaseURL,
		Host: HostInfo{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()},
	}
	run.Engine = t.engineName(ctx)
	if err := t.resolveVoice(ctx, o.Voice); err != nil {
		return nil, err
	}
	run.Voice = t.voiceRef
	rec, err := record(ctx, t, o.Format)
	if err != nil {
		return nil, err
	}
	bare, err := spawnBare(ctx, rec, o.ServerPID)
	if err != nil {
		return nil, err
	}
	defer bare.close()
	bt := *t
	bt.base, bt.apiRoot = bare.url, bare.url+apiPath
	usage := t.pickUsageSource(ctx, o.ServerPID)
	type side struct {
		t     *target
		usage usageSource
		bare  bool
	}
	sides := []side{{&bt, procSource{bare.pid()}, true}, {t, usage, false}}
	for _, level := range levels {
		lo := levelOptions(o, level)
		for r := 1; r <= rounds; r++ {
			for _, name := range Scenarios {
				for _, s := range sides {
					if ctx.Err() != nil {
						return run, ctx.Err()
					}
					res, err := runLevel(ctx, lo, s.t, s.usage, name, level)
					if err != nil {
						return run, err
					}
					if s.bare {
						res.Scenario = barePrefix + name
					}
					res.Note = strings.TrimPrefix(res.Note+"; ", "; ") + fmt.Sprintf("round %d of %d", r, rounds)
					run.Results = append(run.Results, res)
				}
			}
			// The other side goes first next round: neither always
			// follows the other's leftovers (closing sessions, a warm
			// cache).
			sides[0], sides[1] = sides[1], sides[0]
		}
	}
	return run, nil
}

// levelOptions: a level of more than one stream is a population of
// realtime listeners (Options.Pace), measured for PacedDuration, unless
// --pace was given either way. Back-to-back requests at 64 streams fill
// both cores with the engine's and the client's work, and the time to
// first byte then measures the queue for a core, not the gateway.
func levelOptions(o Options, level float64) Options {
	if level > 1 && !o.setFlags["pace"] {
		o.Pace = true
	}
	if o.Pace && o.PacedDuration > 0 && !o.setFlags["requests"] {
		o.Duration = o.PacedDuration
	}
	return o
}
