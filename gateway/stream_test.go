package gateway

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

func TestStreamSSE(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	path := "/voices/" + ss.voice + "/stream"
	cases := []struct {
		f    codec.Format
		rate int
	}{
		{"", 24000}, // default f32le at the native rate
		{codec.S16LE, 8000}, {codec.S24LE, 48000}, {codec.S32LE, 24000}, {codec.F32LE, 48000}, {codec.F64LE, 8000},
		{codec.MuLaw, 8000}, {codec.ALaw, 8000}, {codec.MuLaw, 16000}, // telephony, G.711
	}
	for _, c := range cases {
		body := map[string]any{"text": "Streaming works. Two sentences."}
		f := c.f
		if f == "" {
			f = codec.F32LE
		} else {
			body["output_format"], body["sample_rate"] = f, c.rate
		}
		resp := ss.post(path, ss.key, body)
		h := resp.Header
		if resp.StatusCode != 200 || h.Get("Content-Type") != "text/event-stream" || h.Get("Cache-Control") != "no-cache" ||
			h.Get("X-Accel-Buffering") != "no" || h.Get("X-Billing-Remaining") == "" || h.Get("X-Request-Id") == "" {
			t.Fatalf("%s: %d %v", f, resp.StatusCode, h)
		}
		evs, err := readSSE(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		s := checkSSE(t, evs, c.rate, f)
		// 27 non-space characters of 60 ms; the first chunk is not coalesced.
		if d := float64(len(s)) / float64(c.rate); d < 1.55 || d > 1.72 || rms(s) < 0.05 || len(evs) < 5 {
			t.Fatalf("%s: %.3f s, rms %.3f, %d events", f, d, rms(s), len(evs))
		}
	}
}

// TestStreamEngineFailsMidway: an engine failing after audio went out ends
// the stream with an error event carrying a section-7 code; nothing follows.
func TestStreamEngineFailsMidway(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: &gatedEngine{Engine: newRef(0), failAt: 6}})
	resp := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "one two three four five six seven"})
	evs, err := readSSE(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || len(evs) < 3 {
		t.Fatalf("status %d, %d events, %v", resp.StatusCode, len(evs), err)
	}
	last := evs[len(evs)-1]
	if evs[0].name != "start" || evs[1].name != "chunk" || last.name != "error" ||
		last.data["code"] != control.EUpstreamError || last.data["message"] == "" {
		t.Fatalf("events: first %v, last %v", evs[0], last)
	}
	for _, ev := range evs[1 : len(evs)-1] {
		if ev.name != "chunk" {
			t.Fatalf("unexpected %v", ev)
		}
	}
}

// readFirstChunk reads SSE lines up to the end of the first chunk event.
func readFirstChunk(t testing.TB, br *bufio.Reader) {
	t.Helper()
	chunk := false
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the first chunk: %v", err)
		}
		if line == "event: chunk\n" {
			chunk = true
		}
		if chunk && line == "\n" {
			return
		}
	}
}

// TestStreamClientGone: a client closing after the first chunk stops the
// engine, frees the slot and leaves no goroutine behind.
func TestStreamClientGone(t *testing.T) {
	g := &gatedEngine{Engine: newRef(1)} // real time: the stream would last 20 s
	ss := newSynthServer(t, synthOpts{eng: g})
	tr := &http.Transport{}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	ss.do("GET", "!/healthz", "", nil) // the server's worker pool is up
	ignore := goleak.IgnoreCurrent()

	req, _ := http.NewRequest("POST", ss.base+APIRoot+"/voices/"+ss.voice+"/stream",
		strings.NewReader(`{"text":"`+strings.Repeat("long text ", 40)+`"}`))
	req.Header.Set("X-API-Key", ss.key)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", resp, err)
	}
	readFirstChunk(t, bufio.NewReader(resp.Body))
	if g.running.Load() != 1 || ss.lim.InUse(ss.ws.ID, control.SlotStream) != 1 {
		t.Fatalf("running %d, slots %d while streaming", g.running.Load(), ss.lim.InUse(ss.ws.ID, control.SlotStream))
	}
	resp.Body.Close()
	tr.CloseIdleConnections()

	if _, ok := waitFor(5*time.Second, func() bool {
		return g.running.Load() == 0 && ss.lim.InUse(ss.ws.ID, control.SlotStream) == 0
	}); !ok {
		t.Fatalf("engine running %d, slots %d after the client left", g.running.Load(), ss.lim.InUse(ss.ws.ID, control.SlotStream))
	}
	if v := metricValue(ss.srv.synth.active); v != 0 {
		t.Fatalf("voicesvc_synth_active %v", v)
	}
	if v := metricValue(ss.srv.synth.m.Outcomes.WithLabelValues("sse", "client_gone", "native")); v != 1 {
		t.Fatalf("client_gone outcomes %v", v)
	}
	// An idle fasthttp pool worker waits for the next connection: the
	// pool's, not a leak.
	goleak.VerifyNone(t, ignore, goleak.IgnoreTopFunction("github.com/valyala/fasthttp.(*workerPool).workerFunc"))
}

// TestStreamCloseReleases: closing the response (what fasthttp does at the
// first failed write) stops the engine and frees the slot; how fast is
// BenchmarkStreamRelease's (target 50 ms).
func TestStreamCloseReleases(t *testing.T) {
	g := &gatedEngine{Engine: newRef(1)}
	ss := newSynthServer(t, synthOpts{eng: g})
	if d := closeAndRelease(t, ss, g); d > time.Second {
		t.Fatalf("released %v after close", d)
	}
}

// BenchmarkStreamRelease: time from closing a running SSE stream to the
// engine stopped and the slot free.
func BenchmarkStreamRelease(b *testing.B) {
	g := &gatedEngine{Engine: newRef(1)}
	ss := newSynthServer(b, synthOpts{eng: g})
	var ds []time.Duration
	for b.Loop() {
		ds = append(ds, closeAndRelease(b, ss, g))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)-1])/1e6, "max-ms")
}

// closeAndRelease starts a long SSE synthesis, reads its first bytes,
// closes it and returns how long the engine and the slot took to let go.
func closeAndRelease(t testing.TB, ss *synthServer, g *gatedEngine) time.Duration {
	t.Helper()
	p := &control.Principal{WorkspaceID: ss.ws.ID, Limits: control.Limits{Concurrency: 1, Billing: control.BillingOff}}
	o, _ := synth.ParseStream([]byte(`{"text":"a long enough text to run for seconds"}`))
	job := new(web.Job)
	if err := ss.srv.core.PrepareInto(context.Background(), p, ss.voice, o, &job.Job); err != nil {
		t.Fatal(err)
	}
	if err := job.Admit(context.Background(), ss.srv.core, p, true); err != nil {
		t.Fatal(err)
	}
	st, err := ss.srv.startStream(job, ss.srv.synth.m.Series(telemetry.Native, telemetry.SSE),
		func(rctx context.Context, st web.Stream) (synth.Result, error) { return job.Run(rctx, st.Send) })
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if n, err := st.Read(buf); n == 0 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	start := time.Now()
	st.Close()
	for g.running.Load() != 0 || ss.lim.InUse(ss.ws.ID, control.SlotStream) != 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("not released within 5 s")
		}
		time.Sleep(50 * time.Microsecond)
	}
	return time.Since(start)
}

// TestStreamConcurrencyLimit: the free plan's third concurrent stream is
// refused with 429 concurrency_limited; a freed slot is usable at once.
func TestStreamConcurrencyLimit(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: newRef(1), plan: "free"})
	noRPS := 0
	ss.store.UpdateWorkspace(context.Background(), ss.ws.ID, control.WorkspaceUpdate{RPS: &noRPS})
	ss.srv.core.ResetKeys()
	body := map[string]any{"text": strings.Repeat("long text ", 40)}
	path := "/voices/" + ss.voice + "/stream"
	var open []*http.Response
	for i := range 2 {
		resp := ss.post(path, ss.key, body)
		if resp.StatusCode != 200 || !strings.HasSuffix(resp.Header.Get("RateLimit"), `"concurrency";r=`+string(rune('1'-i))) {
			t.Fatalf("stream %d: %d %q", i, resp.StatusCode, resp.Header.Get("RateLimit"))
		}
		readFirstChunk(t, bufio.NewReader(resp.Body))
		open = append(open, resp)
	}
	r := ss.do("POST", path, ss.key, body)
	r.failure(t, 429, "concurrency_limited")
	if r.header.Get("Retry-After") != "1" || r.header.Get("RateLimit") != `"concurrency";r=0` {
		t.Fatalf("429 headers: %v", r.header)
	}
	open[0].Body.Close()
	if _, ok := waitFor(5*time.Second, func() bool { return ss.lim.InUse(ss.ws.ID, control.SlotStream) == 1 }); !ok {
		t.Fatal("slot not freed")
	}
	resp := ss.post(path, ss.key, body)
	if resp.StatusCode != 200 {
		t.Fatalf("after a slot freed: %d", resp.StatusCode)
	}
	resp.Body.Close()
	open[1].Body.Close()
}

// metricValue reads a gauge or counter.
func metricValue(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

// TestStreamClientGoneStopsPool: the same through the engine pool, whose
// state shows the request cancelled; and a full pool queue answers 503
// upstream_busy with Retry-After.
func TestStreamClientGoneStopsPool(t *testing.T) {
	// The plain engine, recycled by the pool as the server does: newRef's
	// Recycled wrapper gave a chunk's samples back as soon as the worker
	// queued the chunk, while it still waited for delivery (a data race,
	// and audio overwritten, under -race).
	pool, err := engine.NewPool(engine.PoolOptions{Engine: reference.New(reference.Options{RTF: 1}),
		Workers: 1, QueueDepth: 1, RecycleSamples: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	ss := newSynthServer(t, synthOpts{eng: pool})
	resp := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "First sentence here. " + strings.Repeat("More words. ", 30)})
	readFirstChunk(t, bufio.NewReader(resp.Body))
	if st := pool.Stats(); st.Requests != 1 {
		t.Fatalf("pool while streaming: %+v", st)
	}
	r := ss.do("POST", "/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "queue is full"})
	r.failure(t, 503, control.EUpstreamBusy)
	if r.header.Get("Retry-After") != "1" {
		t.Fatalf("503 without Retry-After")
	}
	resp.Body.Close()
	if _, ok := waitFor(5*time.Second, func() bool {
		st := pool.Stats()
		return st.Requests == 0 && st.Active == 0 && st.Cancelled == 1 && ss.lim.InUse(ss.ws.ID, control.SlotStream) == 0
	}); !ok {
		t.Fatalf("pool after the client left: %+v, slots %d", pool.Stats(), ss.lim.InUse(ss.ws.ID, control.SlotStream))
	}
}

// The first Read hands fasthttp the stream's first piece alone, so that it
// is written at once even when a fast engine has queued more behind it;
// later Reads take everything already queued.
func TestAudioStreamFirstPieceAlone(t *testing.T) {
	st := &audioStream{ch: make(chan []byte, 4), free: make(chan []byte, 4),
		gone: make(chan struct{}), first: make(chan struct{})}
	for _, piece := range []string{"first", "second", "third"} {
		st.ch <- []byte(piece)
	}
	close(st.ch)
	p := make([]byte, 4096)
	for _, want := range []string{"first", "secondthird"} {
		n, err := st.Read(p)
		if err != nil || string(p[:n]) != want {
			t.Fatalf("Read: %q, %v; want %q", p[:n], err, want)
		}
	}
	if n, err := st.Read(p); n != 0 || err == nil {
		t.Fatalf("Read at the end: %d, %v; want 0, EOF", n, err)
	}
}

// deadlineConn counts the write deadlines set on it.
type deadlineConn struct {
	net.Conn
	set []time.Time
}

func (c *deadlineConn) SetWriteDeadline(t time.Time) error {
	c.set = append(c.set, t)
	return nil
}

// A stream moves its connection's write deadline at most deadlineSteps
// times per idle period, and not on the way to the first byte when the
// response's own deadline (set by fasthttp for the route) is known to be
// far enough ahead; every move puts it idle+idle/deadlineSteps ahead.
func TestAudioStreamSlidingDeadline(t *testing.T) {
	for _, tt := range []struct {
		name  string
		idle  time.Duration
		set   time.Time // when the response's deadline was set
		moves int       // over three pieces read one by one
	}{
		{"route deadline fresh: no move", time.Hour, time.Now(), 0},
		{"route deadline unknown: the first piece moves it", time.Hour, time.Time{}, 1},
		{"route deadline old: the first piece moves it", time.Hour, time.Now().Add(-time.Hour), 1},
		{"a period under the clock's step: every piece moves it", time.Nanosecond, time.Now(), 3},
		{"no idle bound: never moved", 0, time.Time{}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := &deadlineConn{}
			st := &audioStream{ch: make(chan []byte, 4), free: make(chan []byte, 4),
				gone: make(chan struct{}), first: make(chan struct{})}
			st.slidingDeadline(conn, tt.idle, tt.set)
			p := make([]byte, 4096)
			for range 3 {
				st.ch <- []byte("piece")
				before, moved := time.Now(), len(conn.set)
				if _, err := st.Read(p); err != nil {
					t.Fatal(err)
				}
				if n := len(conn.set); n > moved && conn.set[n-1].Before(before.Add(tt.idle+tt.idle/deadlineSteps)) {
					t.Fatalf("deadline %v, want at least idle+idle/%d after the Read", conn.set[n-1].Sub(before), deadlineSteps)
				}
			}
			if len(conn.set) != tt.moves {
				t.Fatalf("%d moves, want %d", len(conn.set), tt.moves)
			}
		})
	}
}
