package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/e2e/harness"
)

// A real WebSocket client (fasthttp/websocket's Dialer) over loopback
// against the real binary.

// wsURL is the realtime endpoint of srv with query q ("" for none).
func wsURL(srv *harness.Server, q url.Values) string {
	u := "ws://" + srv.Addr + harness.APIPath + "/stream"
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// wsHandshake is the outcome of one dial: the connection (101) or the
// refused response with its body read.
type wsHandshake struct {
	c      *wsc
	status int
	header http.Header
	body   []byte
	err    error
}

// code is the envelope's code, or the flat body's error string.
func (h *wsHandshake) code() string {
	r := &resp{status: h.status, body: h.body}
	return r.code()
}

func (h *wsHandshake) outcome() string {
	r := &resp{status: h.status, body: h.body}
	return r.outcome()
}

var wsDialer = &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}

// wsDial opens a session; the connection is closed when the test ends.
func wsDial(t testing.TB, srv *harness.Server, q url.Values, h http.Header) *wsHandshake {
	t.Helper()
	c, r, err := wsDialer.Dial(wsURL(srv, q), h)
	out := &wsHandshake{err: err}
	if r != nil {
		out.status, out.header = r.StatusCode, r.Header
		if r.Body != nil {
			out.body, _ = io.ReadAll(r.Body)
			r.Body.Close()
		}
	}
	if c != nil {
		out.c = &wsc{t: t, ws: c}
		t.Cleanup(func() { c.Close() })
	}
	return out
}

// wsOpen dials with the X-API-Key header and fails unless it upgrades.
func wsOpen(t testing.TB, srv *harness.Server, key string) *wsc {
	t.Helper()
	h := wsDial(t, srv, nil, http.Header{"X-Api-Key": {key}})
	if h.c == nil {
		t.Fatalf("handshake: %v %s", h.err, h.outcome())
	}
	return h.c
}

// wsEvent is any server message; audio_chunk events carry the binary
// frame that followed them. A close from the server is Type "close".
type wsEvent struct {
	Type               string         `json:"type"`
	ContextID          string         `json:"context_id"`
	SampleRate         int            `json:"sample_rate"`
	AudioFormat        string         `json:"audio_format"`
	SentenceIndex      int            `json:"sentence_index"`
	ChunkIndex         int            `json:"chunk_index"`
	AudioDuration      float64        `json:"audio_duration_s"`
	ByteLength         int            `json:"byte_length"`
	Text               string         `json:"text"`
	NumSentences       int            `json:"num_sentences"`
	TotalAudioDuration float64        `json:"total_audio_duration_s"`
	Profile            map[string]any `json:"profile"`
	TraceID            string         `json:"trace_id"`
	SentencesCompleted int            `json:"sentences_completed"`
	SentencesDropped   int            `json:"sentences_dropped"`
	Code               string         `json:"code"`
	Message            string         `json:"message"`
	Fatal              bool           `json:"fatal"`
	Reason             string         `json:"reason"`
	Bin                []byte         `json:"-"`
	CloseCode          int            `json:"-"`
}

func (e wsEvent) String() string {
	switch e.Type {
	case "error":
		return fmt.Sprintf("error(%s %s fatal=%v)", e.ContextID, e.Code, e.Fatal)
	case "close":
		return fmt.Sprintf("close(%d)", e.CloseCode)
	}
	return e.Type + "(" + e.ContextID + ")"
}

// wsc is one client session.
type wsc struct {
	t  testing.TB
	ws *websocket.Conn
}

func (c *wsc) send(v any) {
	c.t.Helper()
	b, ok := v.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(v); err != nil {
			c.t.Fatal(err)
		}
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := c.ws.WriteMessage(websocket.TextMessage, b); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// start sends a task_start for context id with extra fields.
func (c *wsc) start(id, voice, text string, finalize bool, extra ...any) {
	c.t.Helper()
	m := map[string]any{"type": "task_start", "context_id": id, "voice_id": voice, "text": text, "finalize": finalize}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	c.send(m)
}

func (c *wsc) cont(id, text string, finalize bool) {
	c.t.Helper()
	c.send(map[string]any{"type": "task_continue", "context_id": id, "text": text, "finalize": finalize})
}

// next reads one event and enforces the pairing rule: an audio_chunk is
// immediately followed by exactly one binary frame of byte_length bytes,
// and no binary frame arrives any other way.
func (c *wsc) next() (wsEvent, error) {
	var ev wsEvent
	_ = c.ws.SetReadDeadline(time.Now().Add(60 * time.Second))
	typ, b, err := c.ws.ReadMessage()
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return wsEvent{Type: "close", CloseCode: ce.Code}, nil
	}
	if err != nil {
		return ev, err
	}
	if typ != websocket.TextMessage {
		return ev, fmt.Errorf("binary frame of %d bytes without an audio_chunk before it", len(b))
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("bad JSON %q: %v", b, err)
	}
	if ev.Type != "audio_chunk" {
		return ev, nil
	}
	typ, b, err = c.ws.ReadMessage()
	switch {
	case err != nil:
		return ev, fmt.Errorf("after audio_chunk: %w", err)
	case typ != websocket.BinaryMessage:
		return ev, fmt.Errorf("audio_chunk followed by a text frame %q", b)
	case len(b) != ev.ByteLength:
		return ev, fmt.Errorf("binary frame of %d bytes, audio_chunk said %d", len(b), ev.ByteLength)
	}
	ev.Bin = b
	return ev, nil
}

func (c *wsc) mustNext() wsEvent {
	c.t.Helper()
	ev, err := c.next()
	if err != nil {
		c.t.Fatal(err)
	}
	return ev
}

// until reads events up to and including the first that stop accepts; a
// close before it fails the test unless stop accepts the close.
func (c *wsc) until(stop func(wsEvent) bool) []wsEvent {
	c.t.Helper()
	var evs []wsEvent
	for {
		ev := c.mustNext()
		evs = append(evs, ev)
		if stop(ev) {
			return evs
		}
		if ev.Type == "close" {
			c.t.Fatalf("closed (%d) while waiting; events: %v", ev.CloseCode, evs)
		}
	}
}

// is matches an event by type and context ("" for any context).
func is(typ, ctx string) func(wsEvent) bool {
	return func(e wsEvent) bool { return e.Type == typ && (ctx == "" || e.ContextID == ctx) }
}

// expectError reads until an error frame and checks its code and that it
// is not fatal.
func (c *wsc) expectError(code string) {
	c.t.Helper()
	evs := c.until(is("error", ""))
	e := evs[len(evs)-1]
	if e.Code != code || e.Fatal {
		c.t.Fatalf("want non-fatal %s, got %v", code, e)
	}
}

// wsContext is what one context received.
type wsContext struct {
	started   *wsEvent
	chunks    []wsEvent
	sentences []wsEvent
	done      *wsEvent
	bytes     int
	chunkDur  float64
}

// collect sorts events by context and checks per-context order: nothing
// before task_started, chunk and sentence indexes in order, nothing after
// task_done.
func collect(t testing.TB, evs []wsEvent) map[string]*wsContext {
	t.Helper()
	out := map[string]*wsContext{}
	for i := range evs {
		e := evs[i]
		if e.ContextID == "" {
			continue
		}
		x := out[e.ContextID]
		if x == nil {
			x = &wsContext{}
			out[e.ContextID] = x
		}
		if x.done != nil {
			t.Fatalf("%v after task_done of %s", e, e.ContextID)
		}
		if x.started == nil && e.Type != "task_started" && e.Type != "error" {
			t.Fatalf("%v before task_started", e)
		}
		switch e.Type {
		case "task_started":
			x.started = &evs[i]
		case "audio_chunk":
			if n := len(x.chunks); n > 0 {
				p := x.chunks[n-1]
				ok := e.SentenceIndex == p.SentenceIndex && e.ChunkIndex == p.ChunkIndex+1 ||
					e.SentenceIndex == p.SentenceIndex+1 && e.ChunkIndex == 0
				if !ok {
					t.Fatalf("%s: chunk %d/%d after %d/%d", e.ContextID, e.SentenceIndex, e.ChunkIndex, p.SentenceIndex, p.ChunkIndex)
				}
			}
			x.chunks = append(x.chunks, e)
			x.bytes += len(e.Bin)
			x.chunkDur += e.AudioDuration
		case "sentence_done":
			if e.SentenceIndex != len(x.sentences) {
				t.Fatalf("%s: sentence_done %d, want %d", e.ContextID, e.SentenceIndex, len(x.sentences))
			}
			x.sentences = append(x.sentences, e)
		case "task_done":
			x.done = &evs[i]
		}
	}
	return out
}

// texts are a context's sentence_done texts.
func (x *wsContext) texts() []string {
	var s []string
	for _, e := range x.sentences {
		s = append(s, e.Text)
	}
	return s
}

// checkDone checks a finished context: sentences, the byte count of its
// f32le audio against its durations, and task_done's record.
func checkDone(t testing.TB, id string, x *wsContext, want []string) {
	t.Helper()
	if x == nil || x.done == nil {
		t.Fatalf("%s: no task_done", id)
	}
	if got := x.texts(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s: sentences %q, want %q", id, got, want)
	}
	d := x.done
	if d.NumSentences != len(want) || d.TraceID == "" || d.Profile["ttfb_ms"] == nil ||
		d.Profile["generate_ms"] == nil || d.Profile["overall_rtf"] == nil {
		t.Fatalf("%s: task_done %+v", id, *d)
	}
	rate := x.started.SampleRate
	if x.started.AudioFormat != "f32le" || rate != 24000 {
		t.Fatalf("%s: task_started %+v", id, *x.started)
	}
	if diff := float64(x.bytes)/4/float64(rate) - d.TotalAudioDuration; diff > 0.002 || diff < -0.002 {
		t.Fatalf("%s: %d bytes of audio, task_done says %.3f s", id, x.bytes, d.TotalAudioDuration)
	}
	if diff := x.chunkDur - d.TotalAudioDuration; diff > 0.01 || diff < -0.01 {
		t.Fatalf("%s: chunks sum to %.3f s, task_done says %.3f s", id, x.chunkDur, d.TotalAudioDuration)
	}
}

// wsServer starts a reference-engine server (unpaced unless rtf > 0) and a
// workspace on plan with the update flags.
func wsServer(t testing.TB, rtf float64, plan string, extra []string, update ...string) (*harness.Server, *env) {
	t.Helper()
	srv := harness.Start(t, harness.Options{Args: refArgs(rtf, extra...)})
	return srv, newEnv(t, srv, plan, update...)
}
