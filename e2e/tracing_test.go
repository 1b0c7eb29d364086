package e2e

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"voicesvc/e2e/harness"
)

// otlpCollector is an OTLP/HTTP trace receiver on loopback that keeps the
// spans it was sent: name -> trace id (hex) of each.
type otlpCollector struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans map[string][]string
}

func newOTLPCollector(t *testing.T) *otlpCollector {
	c := &otlpCollector{spans: map[string][]string{}}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		var req collectortrace.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					c.spans[s.GetName()] = append(c.spans[s.GetName()], hex.EncodeToString(s.GetTraceId()))
				}
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		resp, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Write(resp)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func (c *otlpCollector) traceIDs(name string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.spans[name]...)
}

// TestTracingExportE2E: with OTEL_EXPORTER_OTLP_ENDPOINT set the binary
// exports a speak's spans over OTLP/HTTP, in the trace of the traceparent
// it was sent; disabled, it exports nothing.
func TestTracingExportE2E(t *testing.T) {
	col := newOTLPCollector(t)
	srv := harness.Start(t, harness.Options{Args: refArgs(0, "--billing", "meter"),
		Env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + col.srv.URL, "OTEL_BSP_SCHEDULE_DELAY=100"}})
	e := newEnv(t, srv, "pro")
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	r := mustCall(t, "POST", e.speakURL(srv), map[string]any{"text": "Traced speech."},
		append(keyHdr(e.key), "traceparent", "00-"+traceID+"-b7ad6b7169203331-01")...)
	if r.status != 200 {
		t.Fatalf("speak: %d %s", r.status, r.body)
	}
	const route = "POST /voices/{id}/speak"
	if !poll(20*time.Second, func() bool {
		for _, id := range col.traceIDs(route) {
			if id == traceID {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no %q span in trace %s was exported; got %v", route, traceID, col.spans)
	}
	for _, child := range []string{"store", "admission", "engine.queue", "first_audio"} {
		if ids := col.traceIDs(child); len(ids) == 0 || ids[0] != traceID {
			t.Errorf("%s span: traces %v, want %s", child, ids, traceID)
		}
	}

	// OTEL_SDK_DISABLED=true wins over an endpoint: nothing is sent. (No
	// endpoint at all is off too: TestNewTracing.)
	quiet := newOTLPCollector(t)
	off := harness.Start(t, harness.Options{Args: refArgs(0), Env: []string{"OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + quiet.srv.URL, "OTEL_SDK_DISABLED=true"}})
	e2 := newEnv(t, off, "pro")
	mustCall(t, "POST", e2.speakURL(off), map[string]any{"text": "Not traced."}, keyHdr(e2.key)...)
	off.Stop()
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if n := len(quiet.spans); n != 0 {
		t.Fatalf("tracing off exported %d span names", n)
	}
}
