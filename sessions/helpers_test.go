package sessions

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"
	"go.uber.org/goleak"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/netpoll"
)

// fasthttp's own background goroutines (its clock, and the worker pool
// cleaner that notices Shutdown only after its sleep) are not sessions'.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"))
}

// testServer is a real server on loopback that serves each session the way
// the gateway does: the handshake read from the socket, the upgrader's
// Conn over the socket itself, and Serve with one poller for all sessions
// (1 KiB buffers, a write buffer pool, no compression). startRunServer
// instead runs Run in a FastHTTPUpgrader's handler.
type testServer struct {
	addr     string
	cancel   context.CancelFunc // ends every session as at server shutdown
	poller   *netpoll.Poller    // nil: startRunServer
	sessions sync.WaitGroup
	mu       sync.Mutex
	results  []error
	handles  []*Session // every session, in the order they started
}

// onAccept, when given to startServer, sets up each accepted socket.
type onAccept func(*net.TCPConn) error

type setupListener struct {
	net.Listener
	setup onAccept
}

func (l setupListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		err = l.setup(c.(*net.TCPConn))
	}
	return c, err
}

func listen(t testing.TB, setup []onAccept) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if len(setup) > 0 {
		ln = setupListener{ln, setup[0]}
	}
	return ln
}

// started records a session that is about to be served.
func (ts *testServer) started(x *Session) {
	ts.mu.Lock()
	ts.handles = append(ts.handles, x)
	ts.mu.Unlock()
}

// ended records a session's result.
func (ts *testServer) ended(err error) {
	ts.mu.Lock()
	ts.results = append(ts.results, err)
	ts.mu.Unlock()
	ts.sessions.Done()
}

// stop ends the sessions still open as at server shutdown (1001).
func (ts *testServer) stop(t testing.TB) {
	ts.cancel()
	done := make(chan struct{})
	go func() { ts.sessions.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("sessions did not end")
	}
}

func startServer(t testing.TB, cfg Config, deps Deps, setup ...onAccept) *testServer {
	t.Helper()
	ln := listen(t, setup)
	p, err := netpoll.New()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: ln.Addr().String(), cancel: cancel, poller: p}
	up := &websocket.Upgrader{
		ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{},
		CheckOrigin: func(*http.Request) bool { return true },
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ts.sessions.Add(1)
			go func() {
				conn, buffered, err := upgradeRaw(up, c)
				if err != nil {
					c.Close()
					ts.sessions.Done()
					return
				}
				x := New(conn, cfg, deps)
				ts.started(x)
				x.Serve(ctx, p, buffered, func(err error) {
					conn.Close()
					ts.ended(err)
				})
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-served
		ts.stop(t)
		p.Close()
	})
	return ts
}

// upgradeRaw reads the handshake from c and upgrades it; the bytes read
// past the request are returned for Serve, and the Conn reads c itself.
func upgradeRaw(up *websocket.Upgrader, c net.Conn) (*websocket.Conn, []byte, error) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	_ = c.SetReadDeadline(time.Time{})
	buffered, _ := br.Peek(br.Buffered())
	buffered = bytes.Clone(buffered)
	rw := bufio.NewReadWriter(bufio.NewReader(bytes.NewReader(nil)), bufio.NewWriter(c))
	conn, err := up.Upgrade(rawResponse{c, rw}, req, nil)
	return conn, buffered, err
}

// rawResponse is the http.ResponseWriter the upgrader hijacks.
type rawResponse struct {
	c  net.Conn
	rw *bufio.ReadWriter
}

func (r rawResponse) Header() http.Header                          { return http.Header{} }
func (r rawResponse) Write(b []byte) (int, error)                  { return r.c.Write(b) }
func (r rawResponse) WriteHeader(int)                              {}
func (r rawResponse) Hijack() (net.Conn, *bufio.ReadWriter, error) { return r.c, r.rw, nil }

// startRunServer is a real fasthttp server whose FastHTTPUpgrader handler
// runs Run on its goroutine.
func startRunServer(t testing.TB, cfg Config, deps Deps) *testServer {
	t.Helper()
	ln := listen(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{addr: ln.Addr().String(), cancel: cancel}
	up := &websocket.FastHTTPUpgrader{
		ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{},
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true },
	}
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		ts.sessions.Add(1)
		err := up.Upgrade(rc, func(c *websocket.Conn) {
			x := New(c, cfg, deps)
			ts.started(x)
			ts.ended(x.Run(ctx))
		})
		if err != nil {
			ts.sessions.Done()
		}
	}}
	served := make(chan struct{})
	go func() { defer close(served); _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ts.stop(t)
		_ = srv.Shutdown()
		<-served
	})
	return ts
}

// session returns the i-th session to start, waiting for its upgrade
// handler (the client can see the 101 before it runs).
func (ts *testServer) session(t testing.TB, i int) *Session {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		ts.mu.Lock()
		n := len(ts.handles)
		var x *Session
		if i < n {
			x = ts.handles[i]
		}
		ts.mu.Unlock()
		if x != nil {
			return x
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d did not start", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// wait returns once every session has returned from Run (so its refunds
// are made).
func (ts *testServer) wait(t testing.TB) {
	t.Helper()
	done := make(chan struct{})
	go func() { ts.sessions.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("sessions did not end")
	}
}

func (ts *testServer) dial(t testing.TB) *client {
	t.Helper()
	c, err := ts.tryDial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.ws.Close() })
	return c
}

// dialSmall connects with a socket receive buffer of rcvbuf bytes, set
// before the connection is made so that its window is small from the
// start.
func (ts *testServer) dialSmall(t testing.TB, rcvbuf int) *client {
	t.Helper()
	nd := &net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, rcvbuf)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 4096, HandshakeTimeout: 10 * time.Second,
		NetDialContext: nd.DialContext}
	ws, _, err := d.Dial("ws://"+ts.addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &client{ws: ws}
}

func (ts *testServer) tryDial() (*client, error) {
	d := websocket.Dialer{ReadBufferSize: 4096, WriteBufferSize: 4096, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial("ws://"+ts.addr+"/", nil)
	if err != nil {
		return nil, err
	}
	return &client{ws: ws}, nil
}

// event is any server message; audio_chunk events carry the binary frame
// that followed them.
type event struct {
	Type               string             `json:"type"`
	ContextID          string             `json:"context_id"`
	SampleRate         int                `json:"sample_rate"`
	AudioFormat        string             `json:"audio_format"`
	SentenceIndex      int                `json:"sentence_index"`
	ChunkIndex         int                `json:"chunk_index"`
	AudioDuration      float64            `json:"audio_duration_s"`
	ByteLength         int                `json:"byte_length"`
	Text               string             `json:"text"`
	NumSentences       int                `json:"num_sentences"`
	TotalAudioDuration float64            `json:"total_audio_duration_s"`
	Profile            map[string]float64 `json:"profile"`
	TraceID            string             `json:"trace_id"`
	SentencesCompleted int                `json:"sentences_completed"`
	RetryAfter         *int               `json:"retry_after"`
	SentencesDropped   int                `json:"sentences_dropped"`
	Code               string             `json:"code"`
	Message            string             `json:"message"`
	Fatal              bool               `json:"fatal"`
	Reason             string             `json:"reason"`
	Timestamps         *bool              `json:"timestamps"`
	Words              []wordTS           `json:"words"`
	AudioSentS         float64            `json:"audio_sent_s"`
	SpokenUntil        int                `json:"spoken_until"`
	Bin                []byte             `json:"-"`
}

// wordTS is one word of a word_timestamps frame.
type wordTS struct {
	Word      string  `json:"word"`
	StartS    float64 `json:"start_s"`
	EndS      float64 `json:"end_s"`
	CharStart int     `json:"char_start"`
	CharEnd   int     `json:"char_end"`
}

type client struct {
	ws  *websocket.Conn
	all []event // every event read, in order
	seq int     // benchmarks: context ids
}

func (c *client) send(v any) error {
	var b []byte
	switch v := v.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	}
	_ = c.ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

func (c *client) mustSend(t testing.TB, v any) {
	t.Helper()
	if err := c.send(v); err != nil {
		t.Fatal(err)
	}
}

// next reads one event. It enforces the pairing rule: an audio_chunk is
// immediately followed by exactly one binary frame of byte_length bytes,
// and no binary frame comes any other way.
func (c *client) next() (event, error) {
	var ev event
	_ = c.ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	typ, b, err := c.ws.ReadMessage()
	if err != nil {
		return ev, err
	}
	if typ != websocket.TextMessage {
		return ev, fmt.Errorf("binary frame of %d bytes without audio_chunk before it", len(b))
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return ev, fmt.Errorf("bad JSON %q: %v", b, err)
	}
	if ev.Type != "audio_chunk" {
		return ev, nil
	}
	typ, b, err = c.ws.ReadMessage()
	if err != nil {
		return ev, fmt.Errorf("after audio_chunk: %w", err)
	}
	if typ != websocket.BinaryMessage {
		return ev, fmt.Errorf("audio_chunk followed by a text frame %q", b)
	}
	if len(b) != ev.ByteLength {
		return ev, fmt.Errorf("binary frame of %d bytes, audio_chunk said %d", len(b), ev.ByteLength)
	}
	ev.Bin = b
	return ev, nil
}

func (c *client) record(ev event) event {
	c.all = append(c.all, ev)
	return ev
}

func (c *client) mustNext(t testing.TB) event {
	t.Helper()
	ev, err := c.next()
	if err != nil {
		t.Fatal(err)
	}
	return c.record(ev)
}

// until reads events until one matches, returning all read.
func (c *client) until(t testing.TB, match func(event) bool) []event {
	t.Helper()
	var evs []event
	for {
		ev := c.mustNext(t)
		evs = append(evs, ev)
		if match(ev) {
			return evs
		}
	}
}

func isType(typ, ctx string) func(event) bool {
	return func(ev event) bool { return ev.Type == typ && (ctx == "" || ev.ContextID == ctx) }
}

// expectClose reads until the server closes and returns the close code.
func (c *client) expectClose(t testing.TB) (int, []event) {
	t.Helper()
	var evs []event
	for {
		ev, err := c.next()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				return ce.Code, evs
			}
			t.Fatalf("want a close frame, got %v (after %d events)", err, len(evs))
		}
		evs = append(evs, c.record(ev))
	}
}

func start(id, text string, finalize bool, extra ...any) map[string]any {
	m := map[string]any{"type": "task_start", "context_id": id, "voice_id": voiceReady, "text": text, "finalize": finalize}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func cont(id, text string, finalize bool) map[string]any {
	return map[string]any{"type": "task_continue", "context_id": id, "text": text, "finalize": finalize}
}

// Voices the test lookup knows, as the gateway's lookup would answer.
const (
	voiceReady   = "0123456789abcdef01234567"
	voiceHigh    = "89abcdef0123456789abcdef"
	voiceDraft   = "aaaaaaaaaaaaaaaaaaaaaaaa"
	voiceDenied  = "bbbbbbbbbbbbbbbbbbbbbbbb"
	refPerCharS  = 0.06 // reference engine: seconds per non-space character
	nativeRateHz = reference.Rate
)

func lookupVoice(_ context.Context, id string) (*control.Voice, error) {
	switch id {
	case voiceReady:
		return &control.Voice{ID: id, Status: control.VoiceReady, Profile: reference.MarshalProfile(220)}, nil
	case voiceHigh:
		return &control.Voice{ID: id, Status: control.VoiceReady, Profile: reference.MarshalProfile(330)}, nil
	case voiceDraft:
		return nil, control.Errorf(control.EVoiceNotReady, "voice is not ready")
	case voiceDenied:
		return nil, control.Errorf(control.EVoiceNotAllowed, "voice not allowed")
	}
	return nil, control.Errorf(control.ENotFound, "voice not found")
}

func refDeps(e engine.Engine) Deps {
	if e == nil {
		e = reference.New()
	}
	return Deps{Engine: e, Voice: lookupVoice}
}

// refDuration is what the reference engine renders for one sentence.
func refDuration(sentence string) float64 {
	n := 0
	for _, r := range sentence {
		if !unicode.IsSpace(r) {
			n++
		}
	}
	return float64(n) * refPerCharS
}

// transcript is what one context received, checked for order and sums.
type transcript struct {
	started   event
	chunks    []event
	sentences []event
	end       event
}

// collect sorts events by context and checks each context's audio: chunk
// and sentence indices in order, binary lengths (checked by next), the
// sentence_done durations equal to the sum of their chunks.
func collect(t testing.TB, evs []event) map[string]*transcript {
	t.Helper()
	out := map[string]*transcript{}
	get := func(id string) *transcript {
		if out[id] == nil {
			out[id] = &transcript{}
		}
		return out[id]
	}
	for _, ev := range evs {
		tr := get(ev.ContextID)
		if ev.Type == "task_started" && tr.end.Type != "" {
			// The id was closed and opened again.
			out[ev.ContextID] = nil
			tr = get(ev.ContextID)
		}
		if ev.Type == "error" {
			continue
		}
		if tr.end.Type != "" {
			t.Fatalf("%s after %s for context %q", ev.Type, tr.end.Type, ev.ContextID)
		}
		switch ev.Type {
		case "task_started":
			tr.started = ev
		case "audio_chunk":
			if tr.started.Type == "" {
				t.Fatalf("audio before task_started for %q", ev.ContextID)
			}
			wantS, wantC := len(tr.sentences), 0
			if n := len(tr.chunks); n > 0 && tr.chunks[n-1].SentenceIndex == wantS {
				wantC = tr.chunks[n-1].ChunkIndex + 1
			}
			if ev.SentenceIndex != wantS || ev.ChunkIndex != wantC {
				t.Fatalf("context %q: chunk (%d,%d), want (%d,%d)", ev.ContextID, ev.SentenceIndex, ev.ChunkIndex, wantS, wantC)
			}
			tr.chunks = append(tr.chunks, ev)
		case "sentence_done":
			if ev.SentenceIndex != len(tr.sentences) {
				t.Fatalf("context %q: sentence_done %d, want %d", ev.ContextID, ev.SentenceIndex, len(tr.sentences))
			}
			var sum float64
			for _, c := range tr.chunks {
				if c.SentenceIndex == ev.SentenceIndex {
					sum += c.AudioDuration
				}
			}
			if !near(sum, ev.AudioDuration) {
				t.Fatalf("context %q sentence %d: chunks sum to %.4f s, sentence_done says %.4f", ev.ContextID, ev.SentenceIndex, sum, ev.AudioDuration)
			}
			tr.sentences = append(tr.sentences, ev)
		case "task_done", "task_cancelled", "task_failed":
			tr.end = ev
		}
	}
	return out
}

func near(a, b float64) bool { d := a - b; return d < 1e-3 && d > -1e-3 }

// checkDone asserts a context rendered exactly these sentences.
func checkDone(t testing.TB, tr *transcript, sentences ...string) {
	t.Helper()
	if tr == nil || tr.end.Type != "task_done" {
		t.Fatalf("context did not finish: %+v", tr)
	}
	if tr.end.NumSentences != len(sentences) || len(tr.sentences) != len(sentences) {
		t.Fatalf("%d sentences (task_done says %d), want %d", len(tr.sentences), tr.end.NumSentences, len(sentences))
	}
	var total float64
	for i, s := range sentences {
		got := tr.sentences[i]
		if got.Text != s || !near(got.AudioDuration, refDuration(s)) {
			t.Fatalf("sentence %d: %q %.3f s, want %q %.3f s", i, got.Text, got.AudioDuration, s, refDuration(s))
		}
		total += got.AudioDuration
	}
	if !near(total, tr.end.TotalAudioDuration) || tr.end.TraceID == "" || tr.end.Profile == nil {
		t.Fatalf("task_done %+v, sentences total %.3f", tr.end, total)
	}
}

func runes(n int) string { return strings.Repeat("a", n) }

// collect reads until match and returns the transcript of match's context
// over everything the client has read.
func (c *client) collect(t testing.TB, match func(event) bool) map[string]*transcript {
	t.Helper()
	c.until(t, match)
	return collect(t, c.all)
}

// meterBilling bills a session's text with a meter, as the core's
// admission does (synth.Admission).
type meterBilling struct {
	m  control.Meter
	ws *control.Workspace
}

func (b meterBilling) Charge(ctx context.Context, chars int64) (control.Charge, error) {
	c, _, err := b.m.Charge(ctx, b.ws, chars)
	return c, err
}

func (b meterBilling) Refund(ctx context.Context, c control.Charge) error { return b.m.Refund(ctx, c) }
