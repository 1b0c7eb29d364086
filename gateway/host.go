package gateway

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// protoHost is the web.Host one protocol package is given: the server's
// plumbing, with the protocol's dialect on its metrics and its shape on
// its errors.
type protoHost struct {
	s     *Server
	proto web.Protocol
}

var _ web.Host = (*protoHost)(nil)

func (h *protoHost) Core() *synth.Service { return h.s.core }
func (h *protoHost) Logger() *slog.Logger { return h.s.log }
func (h *protoHost) Series(transport string) *telemetry.Series {
	return h.s.synth.m.Series(h.proto.Dialect(), transport)
}

func (h *protoHost) WriteError(ctx *fasthttp.RequestCtx, err error) { h.s.writeError(ctx, err) }

func (h *protoHost) Cause(ctx context.Context, err error) error { return h.s.drain.cause(ctx, err) }

func (h *protoHost) AuthKey(key []byte) (*control.Principal, error) { return h.s.authKey(key) }

func (h *protoHost) AuthToken(token []byte) (*control.Principal, error) {
	return h.s.core.AuthToken(token)
}

func (h *protoHost) Session(ctx *fasthttp.RequestCtx) (*control.DashboardSession, error) {
	return h.s.session(ctx)
}
func (h *protoHost) SameOrigin(ctx *fasthttp.RequestCtx) bool { return h.s.sameOrigin(ctx) }
func (h *protoHost) SetSessionCookie(ctx *fasthttp.RequestCtx, secret string, expires int64) {
	h.s.setSessionCookie(ctx, secret, expires)
}
func (h *protoHost) UploadBody(ctx *fasthttp.RequestCtx) (io.Reader, error) {
	return h.s.uploadBody(ctx)
}
func (h *protoHost) AllowRequest(ctx *fasthttp.RequestCtx, p *control.Principal) error {
	return h.s.admitRequest(ctx, p)
}

// Handle registers r under the API root (or at the host root) with the
// route wrapper: request id, CORS, credentials and scope (or r.Auth),
// the request rate, metrics, the access log, and r's idempotency.
func (h *protoHost) Handle(r web.Route, handler web.Handler) {
	s := h.s
	name := r.Name
	if name == "" {
		name = r.Method + " " + r.Path
	}
	rt := s.apiRoute(name, r.Scope, creds(r.Creds))
	rt.auth, rt.cors = r.Auth, !r.Root || r.CORS
	if rt.firstMessage = r.FirstMessage; rt.firstMessage != nil && (r.Auth == nil || rt.firstMessage.Auth == nil) {
		panic("gateway: route " + name + ": FirstMessage needs Route.Auth and FirstMessage.Auth")
	}
	if r.Idempotent {
		handler = s.idempotent(handler, r.Fingerprint)
	}
	if tail := literalTail(r.Path); r.Streams && tail == "" {
		// A path that ends in its parameter has no tail to know it by:
		// its literal part before the parameter, then one segment.
		prefix := r.Path[:strings.LastIndexByte(r.Path, '{')]
		if !r.Root {
			prefix = APIRoot + prefix
		}
		s.streamPrefixes = append(s.streamPrefixes, prefix)
	} else if r.Streams && !slices.Contains(s.streamPaths, tail) {
		s.streamPaths = append(s.streamPaths, tail)
	}
	if tail := literalTail(r.Path); r.Upload && !slices.Contains(s.uploadPaths, tail) {
		s.uploadPaths = append(s.uploadPaths, tail)
	}
	var g registrar = s.apiGroup
	if r.Root {
		g = s.router
	}
	s.handle(g, r.Method, r.Path, rt, handler)
}

// literalTail is the part of a route path after its last parameter: what
// requestConfig can recognize before routing.
func literalTail(path string) string {
	if i := strings.LastIndexByte(path, '}'); i >= 0 {
		return path[i+1:]
	}
	return path
}

func creds(c web.Creds) credKind {
	switch c {
	case web.Tokens:
		return withTokens
	case web.BearerKeys:
		return withBearerKeys
	case web.SessionOnly:
		return sessionOnly
	}
	return keysOnly
}

// Begin prepares and admits a job, answering a refusal (nil).
func (h *protoHost) Begin(ctx *fasthttp.RequestCtx, p *control.Principal, ref string, o synth.Options, streaming bool) *web.Job {
	job, err := h.Prepare(ctx, p, ref, o)
	if err != nil {
		h.WriteError(ctx, err)
		return nil
	}
	if !h.Admit(ctx, p, job, streaming) {
		return nil
	}
	return job
}

// Prepare asks the core for the job of ref and notes the voice lookup's
// span times when traced.
func (h *protoHost) Prepare(ctx *fasthttp.RequestCtx, p *control.Principal, ref string, o synth.Options) (*web.Job, error) {
	s := h.s
	lookup := s.traceClock()
	job := new(web.Job)
	if err := s.core.PrepareInto(ctx, p, ref, o, &job.Job); err != nil {
		return nil, err
	}
	if s.tracer != nil {
		job.Trace = &jobTrace{lookupStart: lookup, lookupEnd: s.traceClock()}
	}
	return job, nil
}

// Admit admits a prepared job (the core's admission: feature, slot,
// charge, token) and sets the admission headers. On refusal the job is
// finished, the error answered, and it returns false.
func (h *protoHost) Admit(ctx *fasthttp.RequestCtx, p *control.Principal, job *web.Job, streaming bool) bool {
	s := h.s
	job.Start = reqStart(ctx)
	tr := traceOf(job)
	var admitStart time.Time
	if s.tracer != nil {
		tr.rs = requestSpan(ctx)
		tr.rs.childSpan(s.tracer, "store", tr.lookupStart, tr.lookupEnd, nil)
		admitStart = time.Now()
	}
	err := job.Admit(ctx, s.core, p, streaming)
	if s.tracer != nil {
		tr.rs.childSpan(s.tracer, "admission", admitStart, time.Now(), err)
	}
	setAdmissionHeaders(ctx, job.Admission, err)
	if err != nil {
		h.WriteError(ctx, err)
		return false
	}
	return true
}

func (h *protoHost) RespondAudio(ctx *fasthttp.RequestCtx, job *web.Job, series *telemetry.Series, buffered bool,
	setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline)) {
	if buffered {
		h.Buffered(ctx, job, series, setHeaders)
		return
	}
	h.Stream(ctx, job, series, func(rctx context.Context, st web.Stream) (synth.Result, error) {
		return job.Run(rctx, st.Send) // after audio: aborts the body
	}, func(ctx *fasthttp.RequestCtx) { setHeaders(ctx, job.Pipe) })
}

func (h *protoHost) Buffered(ctx *fasthttp.RequestCtx, job *web.Job, series *telemetry.Series,
	setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline)) {
	h.s.bufferedAudio(ctx, job, series, setHeaders)
}

func (h *protoHost) Stream(ctx *fasthttp.RequestCtx, job *web.Job, series *telemetry.Series, run web.StreamFunc,
	headers func(*fasthttp.RequestCtx)) bool {
	s := h.s
	st, err := s.startStream(job, series, run)
	if err != nil {
		s.synthFailed(ctx, err)
		return false
	}
	headers(ctx)
	// A long text on a slow engine may stream for longer than the write
	// timeout of the route: bound each write instead of the whole body.
	// fasthttp sets the response's own deadline when this handler returns,
	// before the first piece: on a streaming route StreamWriteTimeout (one
	// hour), which then covers the first pieces, so that the path to the
	// first byte moves no deadline (stream.go, deadlineSteps).
	idle := s.cfg.WriteTimeout
	var set time.Time
	if s.cfg.StreamWriteTimeout >= idle+idle/deadlineSteps && s.isStreamPath(ctx.Path()) {
		set = time.Now()
	}
	st.slidingDeadline(ctx.Conn(), idle, set)
	st.watchClient(ctx.Conn())
	ctx.SetBodyStream(st, -1)
	return true
}

// traceOf is the job's spans; a shared empty one when untraced (nothing
// writes to it then: every write is behind a tracer check).
func traceOf(j *web.Job) *jobTrace {
	if t, ok := j.Trace.(*jobTrace); ok {
		return t
	}
	return &noTrace
}

var noTrace jobTrace
