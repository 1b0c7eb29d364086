package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"voicesvc/sessions"
	"voicesvc/telemetry"
)

// The realtime contexts' series and spans (sessions.ContextObserver):
// voicesvc_realtime_contexts, and per context voicesvc_synth_total,
// voicesvc_time_to_first_audio_seconds and voicesvc_synth_duration_seconds
// with transport="websocket". With tracing on, each context is a trace of
// its own (its trace_id is the span's trace id), linked to the span of the
// session's handshake, with first_audio and engine.queue children.

// wsObserver observes the contexts of one session.
type wsObserver struct {
	s      *Server
	series *telemetry.Series // the protocol's websocket series
	link   trace.Link        // the handshake's span; only with tracing on
}

// wsObserverFor is the observer of a session opened by the handshake ctx.
func (s *Server) wsObserverFor(ctx *fasthttp.RequestCtx, series *telemetry.Series) sessions.ContextObserver {
	o := &wsObserver{s: s, series: series}
	if rs := requestSpan(ctx); rs != nil {
		o.link = trace.Link{SpanContext: rs.span.SpanContext()}
	}
	return o
}

func (o *wsObserver) ContextStarted(start time.Time, engine string) sessions.ContextSpan {
	o.s.synth.m.Contexts.Inc()
	c := &wsContext{o: o, start: start, engine: engine}
	if o.s.tracer != nil {
		_, c.span = o.s.tracer.Start(context.Background(), "websocket context",
			trace.WithNewRoot(), trace.WithTimestamp(start), trace.WithLinks(o.link),
			trace.WithSpanKind(trace.SpanKindServer))
	}
	return c
}

// wsContext follows one context.
type wsContext struct {
	o      *wsObserver
	start  time.Time
	engine string
	span   trace.Span // nil: tracing off
}

func (c *wsContext) TraceID() string {
	if c.span == nil {
		return "" // the session makes its own
	}
	return c.span.SpanContext().TraceID().String()
}

func (c *wsContext) FirstAudio(ttfa, engine time.Duration) {
	c.o.series.FirstAudio(c.engine, ttfa)
	if c.span == nil {
		return
	}
	at := c.start.Add(ttfa)
	ctx := trace.ContextWithSpan(context.Background(), c.span)
	_, q := c.o.s.tracer.Start(ctx, "engine.queue", trace.WithTimestamp(at.Add(-engine)))
	q.End(trace.WithTimestamp(at))
	_, f := c.o.s.tracer.Start(ctx, "first_audio", trace.WithTimestamp(c.start))
	f.End(trace.WithTimestamp(at))
}

func (c *wsContext) End(outcome string, d time.Duration) {
	c.o.s.synth.m.Contexts.Dec()
	ts := c.o.series
	ts.Duration.Observe(d.Seconds())
	ts.Outcome(outcome)
	if c.span != nil {
		c.span.SetAttributes(attribute.String("voicesvc.outcome", outcome))
		switch outcome {
		case "ok", "cancelled", "session_ended", "client_gone":
		default:
			c.span.SetStatus(codes.Error, outcome)
		}
		c.span.End(trace.WithTimestamp(c.start.Add(d)))
	}
}
