package gateway

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"voicesvc/control"
	"voicesvc/web"
)

// OpenTelemetry tracing (README, "Tracing"). Off unless Deps.TracerProvider
// is set (the serve command sets it when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is): every hook starts with a nil
// check of s.tracer, so with tracing off a request reads no header, no
// clock and allocates nothing for it.
//
// Spans: one per authenticated API request (the route's name, kind
// server; a W3C traceparent sent by the client is its parent), ending when
// the response ends: for a streamed body when the stream does. Its
// children on the synthesis routes:
//
//	store        the voice lookup (voice cache, then the store)
//	admission    the concurrency slot, the charge, the token
//	engine.queue from the synthesis start to the engine's first audio: the
//	             wait for a worker and the first sentence
//	first_audio  from the request to its first audio handed to the
//	             connection (a buffered answer: the whole body)
//
// The realtime sessions make one span per context (sessions).

const spanKey = "voicesvc.span"

// reqSpan is the span of one request, kept in the RequestCtx's user
// values between the route wrapper and the handlers.
type reqSpan struct {
	ctx  context.Context // carries span
	span trace.Span
	// refs: 1, or 2 once a stream carries the request: the span ends at
	// the last of the route wrapper's finish and the stream's end.
	refs atomic.Int32
}

func (rs *reqSpan) release() {
	if rs.refs.Add(-1) == 0 {
		rs.span.End()
	}
}

var traceContext = propagation.TraceContext{}

// headerCarrier reads an incoming traceparent and tracestate.
type headerCarrier struct{ h *fasthttp.RequestHeader }

func (c headerCarrier) Get(key string) string { return string(c.h.Peek(key)) }
func (c headerCarrier) Set(string, string)    {}
func (c headerCarrier) Keys() []string        { return []string{"traceparent", "tracestate"} }

// startSpan opens the request's span (route wrapper, begin).
func (s *Server) startSpan(ctx *fasthttp.RequestCtx, rt *route) {
	parent := traceContext.Extract(context.Background(), headerCarrier{&ctx.Request.Header})
	c, span := s.tracer.Start(parent, rt.name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(reqStart(ctx)),
		trace.WithAttributes(attribute.String("http.route", rt.name),
			attribute.String("http.request.method", string(ctx.Method())),
			attribute.String("voicesvc.request_id", string(web.RequestID(ctx)))))
	rs := &reqSpan{ctx: c, span: span}
	rs.refs.Store(1)
	ctx.SetUserValue(spanKey, rs)
}

// requestSpan is the request's span, nil when tracing is off.
func requestSpan(ctx *fasthttp.RequestCtx) *reqSpan {
	rs, _ := ctx.UserValue(spanKey).(*reqSpan)
	return rs
}

// finishSpan records the status and ends the span, unless a streamed body
// took it over (route wrapper, finish).
func (s *Server) finishSpan(ctx *fasthttp.RequestCtx) {
	rs := requestSpan(ctx)
	if rs == nil {
		return
	}
	status := ctx.Response.StatusCode()
	rs.span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		rs.span.SetStatus(codes.Error, strconv.Itoa(status))
	}
	rs.release()
}

// childSpan records a finished step of the request from start to end.
func (rs *reqSpan) childSpan(tracer trace.Tracer, name string, start, end time.Time, err error) {
	if rs == nil || start.IsZero() {
		return
	}
	_, sp := tracer.Start(rs.ctx, name, trace.WithTimestamp(start))
	if err != nil {
		sp.SetStatus(codes.Error, control.ErrorCode(err))
	}
	sp.End(trace.WithTimestamp(end))
}

// traceClock is now when tracing is on, the zero time otherwise (no clock
// read on the untraced path).
func (s *Server) traceClock() time.Time {
	if s.tracer == nil {
		return time.Time{}
	}
	return time.Now()
}

// jobTrace is what a synthesis records for its spans, when traced.
type jobTrace struct {
	rs                     *reqSpan
	lookupStart, lookupEnd time.Time // the voice lookup (prepareSynth)
}

// endStreamSpan ends a streamed request's span when its body ends.
func (s *Server) endStreamSpan(rs *reqSpan, err error) {
	if rs == nil {
		return
	}
	if err != nil {
		rs.span.SetAttributes(attribute.String("voicesvc.outcome", outcomeOf(err)))
		if !isClientGone(err) {
			rs.span.SetStatus(codes.Error, control.ErrorCode(err))
		}
	}
	rs.release()
}

// outcomeOf is the voicesvc_synth_total outcome of a finished synthesis.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case isClientGone(err):
		return "client_gone"
	}
	return control.ErrorCode(err)
}
