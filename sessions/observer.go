package sessions

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"voicesvc/telemetry"
)

// Observer is the server's ContextObserver: the realtime contexts' series
// and spans (docs/api.md#metrics, #tracing): voicesvc_realtime_contexts,
// and per context voicesvc_synth_total, voicesvc_time_to_first_audio_seconds
// and voicesvc_synth_duration_seconds with transport="websocket". With a
// Tracer, each context is a trace of its own (its trace_id is the span's
// trace id), linked to the span of the session's handshake, with
// first_audio and engine.queue children. The outcomes of a context that
// did not fail (ok, cancelled, session_ended, client_gone) are not span
// errors.
type Observer struct {
	Series   *telemetry.Series // the protocol's websocket series
	Contexts prometheus.Gauge  // voicesvc_realtime_contexts, all sessions
	Tracer   trace.Tracer      // nil: tracing off
	Link     trace.Link        // the handshake's span; only with tracing on
}

func (o *Observer) ContextStarted(start time.Time, engine string) ContextSpan {
	o.Contexts.Inc()
	c := &observed{o: o, start: start, engine: engine}
	if o.Tracer != nil {
		_, c.span = o.Tracer.Start(context.Background(), "websocket context",
			trace.WithNewRoot(), trace.WithTimestamp(start), trace.WithLinks(o.Link),
			trace.WithSpanKind(trace.SpanKindServer))
	}
	return c
}

// observed follows one context.
type observed struct {
	o      *Observer
	start  time.Time
	engine string
	span   trace.Span // nil: tracing off
}

func (c *observed) TraceID() string {
	if c.span == nil {
		return "" // the session makes its own
	}
	return c.span.SpanContext().TraceID().String()
}

func (c *observed) FirstAudio(ttfa, engine time.Duration) {
	c.o.Series.FirstAudio(c.engine, ttfa)
	if c.span == nil {
		return
	}
	at := c.start.Add(ttfa)
	ctx := trace.ContextWithSpan(context.Background(), c.span)
	_, q := c.o.Tracer.Start(ctx, "engine.queue", trace.WithTimestamp(at.Add(-engine)))
	q.End(trace.WithTimestamp(at))
	_, f := c.o.Tracer.Start(ctx, "first_audio", trace.WithTimestamp(c.start))
	f.End(trace.WithTimestamp(at))
}

func (c *observed) End(outcome string, d time.Duration) {
	c.o.Contexts.Dec()
	ts := c.o.Series
	ts.Duration.Observe(d.Seconds())
	ts.Outcome(outcome)
	if c.span != nil {
		c.span.SetAttributes(attribute.String("voicesvc.outcome", outcome))
		switch outcome {
		case outcomeOK, outcomeCancelled, outcomeSessionEnded, outcomeClientGone:
		default:
			c.span.SetStatus(codes.Error, outcome)
		}
		c.span.End(trace.WithTimestamp(c.start.Add(d)))
	}
}
