package gateway

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
	"voicesvc/web"
)

// payload is the data of a success envelope. Hot-path payloads append
// their JSON by hand; anything else can go through jsonValue.
type payload interface {
	appendJSON(b []byte) []byte
}

// jsonValue is a payload marshalled with encoding/json, for responses that
// are neither frequent nor large (health, admin-like answers).
type jsonValue struct{ v any }

func (j jsonValue) appendJSON(b []byte) []byte {
	out, err := json.Marshal(j.v)
	if err != nil {
		// Only unsupported types fail; a programming error, never input.
		panic("gateway: cannot marshal payload: " + err.Error())
	}
	return append(b, out...)
}

var (
	hdrRetryAfter   = []byte("Retry-After")
	contentTypeJSON = []byte("application/json")
	errNotFound     = control.Errorf(control.ENotFound, "not found")
)

// writeData answers with the success envelope of docs/api.md#envelope:
// {"status": N, "data": ..., "error": false}.
func (s *Server) writeData(ctx *fasthttp.RequestCtx, status int, data payload) {
	buf := bytebufferpool.Get()
	b := append(buf.B[:0], `{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"data":`...)
	b = data.appendJSON(b)
	b = append(b, `,"error":false}`...)
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBody(b)
	buf.B = b
	bytebufferpool.Put(buf)
}

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

// appendString appends s as a JSON string, escaped as encoding/json does.
func appendString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }

// jsonFields appends `,"name":` (or `"name":` as the first field).
func appendKey(b []byte, first bool, name string) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}

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
