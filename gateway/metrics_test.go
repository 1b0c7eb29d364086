package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// scrape reads /metrics: every sample by its name and sorted labels
// (histograms: their _count), as the text a query would name it.
func (ss *synthServer) scrape() map[string]float64 {
	ss.t.Helper()
	resp, err := http.Get(ss.base + "/metrics")
	if err != nil {
		ss.t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		ss.t.Fatal(err)
	}
	out := map[string]float64{}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			out[seriesKey(name, m)] = sampleValue(m)
		}
	}
	return out
}

func seriesKey(name string, m *dto.Metric) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, l := range m.GetLabel() { // sorted by name
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.GetName() + `="` + l.GetValue() + `"`)
	}
	b.WriteByte('}')
	return b.String()
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// TestMetricsMoveWithTraffic: real traffic on every transport (speak
// buffered and streamed, SSE, compat, a WebSocket context) through the
// engine pool, and a refused request, move every synthesis series of
// docs/api.md#metrics, each under its bounded labels.
func TestMetricsMoveWithTraffic(t *testing.T) {
	pool, err := engine.NewPool(engine.PoolOptions{Engine: reference.New(), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pool.Close() })
	ss := newSynthServer(t, synthOpts{eng: pool})
	eng := pool.Name()
	before := ss.scrape()

	// HTTP: speak (wav is buffered, s16le streams), SSE, compat (streamed).
	for _, tc := range []struct {
		path string
		body map[string]any
		hdr  []string
	}{
		{"/voices/" + ss.voice + "/speak", map[string]any{"text": "Hello there."}, nil},
		{"/voices/" + ss.voice + "/speak", map[string]any{"text": "Hello there.", "output_format": "s16le"}, nil},
		{"/voices/" + ss.voice + "/stream", map[string]any{"text": "Hello there."}, nil},
		{"/compat/audio/speech", map[string]any{"model": "service-v1", "voice": ss.voice, "input": "Hello there.",
			"response_format": "pcm"}, bearerHdr(ss.key)},
	} {
		key := ss.key
		if tc.hdr != nil {
			key = ""
		}
		resp := ss.post(tc.path, key, tc.body, tc.hdr...)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, b)
		}
	}

	// WebSocket: while a session and an unfinished context are open, the
	// gauges show them; then the context is cancelled and another runs to
	// task_done.
	c, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": "open", "voice_id": ss.voice,
		"text": "No sentence end yet"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "task_started")
	open := ss.scrape()
	if open["voicesvc_realtime_sessions{}"] != 1 || open["voicesvc_realtime_contexts{}"] != 1 {
		t.Errorf("open: sessions %v contexts %v, want 1 and 1",
			open["voicesvc_realtime_sessions{}"], open["voicesvc_realtime_contexts{}"])
	}
	if err := c.WriteJSON(map[string]any{"type": "task_cancel", "context_id": "open"}); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "task_cancelled")
	speakOnce(t, c, ss.voice, "spoken")
	c.Close()

	// A refusal: a workspace of the free plan (2 requests a second) asks
	// until it is refused.
	free := ss.newKey(ss.workspace("free").ID, nil, 0, false)
	refused := false
	for i := 0; i < 50 && !refused; i++ {
		refused = ss.do("GET", "/voices", free, nil).status == http.StatusTooManyRequests
	}
	if !refused {
		t.Fatal("the free plan's request rate never refused")
	}

	// The session ends on its goroutine after the close.
	var after map[string]float64
	waitFor(10*time.Second, func() bool {
		after = ss.scrape()
		return after["voicesvc_realtime_sessions{}"] == 0
	})
	moved := func(series string, min float64) {
		t.Helper()
		if d := after[series] - before[series]; d < min {
			t.Errorf("%s moved by %v, want at least %v", series, d, min)
		}
	}
	// Each transport's series carry the dialect whose protocol it spoke.
	for _, tr := range []struct{ transport, dialect string }{
		{"speak", "native"}, {"sse", "native"}, {"compat", "openai"}, {"websocket", "native"}} {
		d := `dialect="` + tr.dialect + `",`
		moved(`voicesvc_time_to_first_audio_seconds{`+d+`engine="`+eng+`",transport="`+tr.transport+`"}`, 1)
		moved(`voicesvc_synth_duration_seconds{`+d+`transport="`+tr.transport+`"}`, 1)
		moved(`voicesvc_synth_total{`+d+`outcome="ok",transport="`+tr.transport+`"}`, 1)
	}
	moved(`voicesvc_time_to_first_audio_seconds{dialect="native",engine="`+eng+`",transport="speak"}`, 2)
	moved(`voicesvc_synth_total{dialect="native",outcome="cancelled",transport="websocket"}`, 1)
	moved(`voicesvc_billed_characters_total{}`, 5*float64(len("Hello there."))+float64(len("No sentence end yet")))
	moved(`voicesvc_limit_refusals_total{code="`+control.ERateLimited+`"}`, 1)
	moved(`voicesvc_store_duration_seconds{method="Charge"}`, 5)
	moved(`voicesvc_store_duration_seconds{method="GetAPIKeyByHash"}`, 1)
	moved(`voicesvc_engine_requests_total{engine="`+eng+`",result="completed"}`, 5)
	moved(`voicesvc_engine_queue_wait_seconds{engine="`+eng+`"}`, 5)
	moved(`voicesvc_engine_sentences_total{engine="`+eng+`"}`, 5)
	moved(`voicesvc_http_request_duration_seconds{route="POST /voices/{id}/stream"}`, 1)
	for _, g := range []string{"voicesvc_realtime_sessions{}", "voicesvc_realtime_contexts{}", "voicesvc_synth_active{}",
		`voicesvc_engine_queue_depth{engine="` + eng + `"}`, `voicesvc_engine_worker_restarts_total{engine="` + eng + `"}`} {
		if v, ok := after[g]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want 0 after the traffic", g, v, ok)
		}
	}
	// Bounded labels: nothing names a workspace, a voice, a key or an id.
	for series := range after {
		for _, secret := range []string{ss.ws.ID, ss.voice, ss.key, "open", "spoken"} {
			if strings.Contains(series, `"`+secret+`"`) {
				t.Errorf("series %s carries %q", series, secret)
			}
		}
	}
}

// TestRefusalMetrics: billing's refusals are counted by code, the plan's
// missing streaming feature too (admit refuses it itself, before the
// limiter and the meter), and a refused charge bills nothing.
func TestRefusalMetrics(t *testing.T) {
	ss := newSynthServer(t, synthOpts{billing: control.BillingEnforce, plan: "free"})
	noRPS := 0
	used := int64(10_000 - 3)
	off := false
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{RPS: &noRPS, Used: &used})
	ss.srv.core.ResetKeys()
	before := ss.scrape()
	if r := ss.do("POST", "/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "four"}); r.status != 402 {
		t.Fatalf("over the allowance: %d %s", r.status, r.body)
	}
	ss.store.UpdateWorkspace(t.Context(), ss.ws.ID, control.WorkspaceUpdate{Streaming: &off})
	ss.srv.core.ResetKeys()
	if r := ss.do("POST", "/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "x"}); r.status != 403 {
		t.Fatalf("without streaming: %d %s", r.status, r.body)
	}
	after := ss.scrape()
	for series, want := range map[string]float64{
		`voicesvc_limit_refusals_total{code="quota_exhausted"}`:  1,
		`voicesvc_limit_refusals_total{code="feature_disabled"}`: 1,
		`voicesvc_limit_refusals_total{code="rate_limited"}`:     0,
		`voicesvc_billed_characters_total{}`:                     0,
	} {
		if d := after[series] - before[series]; d != want {
			t.Errorf("%s moved by %v, want %v", series, d, want)
		}
	}
}

// TestMetricsWorkspaceLabel: only when the operator asks do the billing
// and refusal series name the workspace.
func TestMetricsWorkspaceLabel(t *testing.T) {
	ss := newSynthServer(t, synthOpts{cfg: Config{MetricsWorkspaceLabel: true}})
	r := ss.post("/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "Hello."})
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("speak: %d", r.StatusCode)
	}
	free := ss.workspace("free")
	key := ss.newKey(free.ID, nil, 0, false)
	for i := 0; i < 50 && ss.do("GET", "/voices", key, nil).status != http.StatusTooManyRequests; i++ {
	}
	got := ss.scrape()
	for series, want := range map[string]float64{
		`voicesvc_billed_characters_total{workspace="` + ss.ws.ID + `"}`:                 6,
		`voicesvc_limit_refusals_total{code="rate_limited",workspace="` + free.ID + `"}`: 1,
	} {
		if got[series] != want {
			t.Errorf("%s = %v, want %v", series, got[series], want)
		}
	}
}
