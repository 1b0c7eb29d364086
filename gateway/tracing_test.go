package gateway

import (
	"encoding/json"
	"io"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// tracedServer is a synthesis server whose spans the recorder keeps.
func tracedServer(t *testing.T) (*synthServer, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(t.Context()) })
	return newSynthServer(t, synthOpts{tracer: tp}), rec
}

// ended waits until the recorder holds a span named name and returns the
// spans ended by then.
func ended(t *testing.T, rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	t.Helper()
	var spans []sdktrace.ReadOnlySpan
	if _, ok := waitFor(10*time.Second, func() bool {
		spans = rec.Ended()
		for _, s := range spans {
			if s.Name() == name {
				return true
			}
		}
		return false
	}); !ok {
		t.Fatalf("no span %q ended", name)
	}
	return spans
}

// TestTraceStream: an SSE request with a traceparent is one span of the
// caller's trace, ended with the stream, with the store, admission,
// engine.queue and first_audio spans as its children.
func TestTraceStream(t *testing.T) {
	ss, rec := tracedServer(t)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	resp := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "Hello there. And again."},
		"traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(b) == 0 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	const route = "POST /voices/{id}/stream"
	var req sdktrace.ReadOnlySpan
	for _, s := range ended(t, rec, route) {
		if s.Name() == route {
			req = s
		}
	}
	if got := req.SpanContext().TraceID().String(); got != traceID {
		t.Errorf("trace id %s, want the traceparent's %s", got, traceID)
	}
	if got := req.Parent().SpanID().String(); got != "00f067aa0ba902b7" {
		t.Errorf("parent %s, want the traceparent's span", got)
	}
	children := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Parent().SpanID() == req.SpanContext().SpanID() {
			children[s.Name()] = s
		}
	}
	for _, name := range []string{"store", "admission", "engine.queue", "first_audio"} {
		c := children[name]
		if c == nil {
			t.Errorf("no %s child span (children: %v)", name, children)
			continue
		}
		if c.StartTime().Before(req.StartTime()) || c.EndTime().After(req.EndTime()) {
			t.Errorf("%s [%v, %v] outside the request's [%v, %v]", name, c.StartTime(), c.EndTime(),
				req.StartTime(), req.EndTime())
		}
	}
	if fa := children["first_audio"]; fa != nil && !fa.EndTime().Before(req.EndTime()) && !fa.EndTime().Equal(req.EndTime()) {
		t.Errorf("first audio after the stream's end")
	}
}

// TestTraceWebSocketContext: each context is a trace of its own, and the
// trace_id of its task_done is that trace's id.
func TestTraceWebSocketContext(t *testing.T) {
	ss, rec := tracedServer(t)
	c, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ids := map[string]bool{}
	for _, id := range []string{"one", "two"} {
		if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": id, "voice_id": ss.voice,
			"text": "Hello there.", "finalize": true}); err != nil {
			t.Fatal(err)
		}
		evs, _ := readUntil(t, c, "task_done")
		done := evs[len(evs)-1]
		tid, _ := done["trace_id"].(string)
		if len(tid) != 32 {
			b, _ := json.Marshal(done)
			t.Fatalf("task_done trace_id %q: %s", tid, b)
		}
		ids[tid] = true
	}
	if len(ids) != 2 {
		t.Fatalf("two contexts share a trace id: %v", ids)
	}
	spans := ended(t, rec, "websocket context")
	waitFor(5*time.Second, func() bool { spans = rec.Ended(); return countNamed(spans, "websocket context") == 2 })
	found := 0
	for _, s := range spans {
		if s.Name() != "websocket context" || !ids[s.SpanContext().TraceID().String()] {
			continue
		}
		found++
		if len(s.Links()) != 1 || !s.Links()[0].SpanContext.IsValid() {
			t.Errorf("context span links %v, want the handshake's span", s.Links())
		}
		var fa bool
		for _, c := range spans {
			fa = fa || (c.Name() == "first_audio" && c.Parent().SpanID() == s.SpanContext().SpanID())
		}
		if !fa {
			t.Errorf("context span %s has no first_audio child", s.SpanContext().TraceID())
		}
	}
	if found != 2 {
		t.Errorf("%d context spans carry the task_done trace ids, want 2", found)
	}
}

func countNamed(spans []sdktrace.ReadOnlySpan, name string) int {
	n := 0
	for _, s := range spans {
		if s.Name() == name {
			n++
		}
	}
	return n
}
