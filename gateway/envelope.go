package gateway

import (
	"errors"
	"strconv"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

var (
	hdrRetryAfter   = []byte("Retry-After")
	contentTypeJSON = []byte("application/json")
	errNotFound     = control.Errorf(control.ENotFound, "not found")
)

// writeError answers with the failure envelope of docs/api.md#envelope, or with the
// flat body for billing and plan denials. It is the only place an error
// becomes a response. A store that cannot be reached (503 store_unavailable,
// Retry-After 1) is logged as a warning with its cause; an error that is not
// *control.Error is "internal error", whose detail is only logged.
func (s *Server) writeError(ctx *fasthttp.RequestCtx, err error) {
	var e *control.Error
	switch {
	case control.StoreUnavailable(err): // classified by the store, the cause kept for this log
		s.log.Warn("store unavailable", "request_id", string(web.RequestID(ctx)),
			"path", string(ctx.Path()), "err", err)
		e = control.ErrStoreUnavailable
	case errors.As(err, &e) && e.Code != control.EInternal:
	default:
		s.log.Error("internal error", "request_id", string(web.RequestID(ctx)),
			"path", string(ctx.Path()), "err", err)
		e = errInternal
	}
	status := web.StatusOf(e.Code)
	if e.RetryAfter > 0 {
		ctx.Response.Header.SetCanonical(hdrRetryAfter, strconv.AppendInt(nil, int64(e.RetryAfter), 10))
	}
	buf := bytebufferpool.Get()
	var b []byte
	if p := s.protocolAt(ctx.Path()); p != nil {
		b = p.AppendError(buf.B[:0], ctx, e, status)
	} else {
		b = web.AppendEnvelopeError(buf.B[:0], ctx, e, status)
	}
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBody(b)
	buf.B = b
	bytebufferpool.Put(buf)
}

var errInternal = &control.Error{Code: control.EInternal, Message: "internal error"}

// protocolAt is the protocol whose error shape answers path: the one with
// the longest prefix of it (web.Protocol.Prefixes); nil: the native
// envelope.
func (s *Server) protocolAt(path []byte) web.Protocol {
	var best web.Protocol
	n := 0
	for _, pp := range s.prefixes {
		if len(pp.prefix) > n && len(path) >= len(pp.prefix) && string(path[:len(pp.prefix)]) == pp.prefix {
			best, n = pp.p, len(pp.prefix)
		}
	}
	return best
}

// protoPrefix is a path prefix and the protocol whose errors answer it.
type protoPrefix struct {
	prefix string
	p      web.Protocol
}
