package gateway

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/valyala/bytebufferpool"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
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
		s.log.Warn("store unavailable", "request_id", string(requestID(ctx)),
			"path", string(ctx.Path()), "err", err)
		e = control.ErrStoreUnavailable
	case errors.As(err, &e) && e.Code != control.EInternal:
	default:
		s.log.Error("internal error", "request_id", string(requestID(ctx)),
			"path", string(ctx.Path()), "err", err)
		e = errInternal
	}
	status := statusOf(e.Code)
	if e.RetryAfter > 0 {
		ctx.Response.Header.SetCanonical(hdrRetryAfter, strconv.AppendInt(nil, int64(e.RetryAfter), 10))
	}
	buf := bytebufferpool.Get()
	var b []byte
	switch {
	case isCompatPath(ctx): // the third-party shape (compat.go)
		b = appendCompatError(buf.B[:0], ctx, e)
	case isFlat(e):
		b = appendFlat(buf.B[:0], e)
	default:
		b = append(buf.B[:0], `{"status":`...)
		b = strconv.AppendInt(b, int64(status), 10)
		b = append(b, `,"error":true,"message":`...)
		b = appendString(b, e.Message)
		if code := wireCode(e); code != "" {
			b = append(b, `,"code":`...)
			b = appendString(b, code)
		}
		b = append(b, `,"request_id":`...)
		b = appendStringBytes(b, requestID(ctx))
		b = append(b, '}')
	}
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBody(b)
	buf.B = b
	bytebufferpool.Put(buf)
}

var errInternal = &control.Error{Code: control.EInternal, Message: "internal error"}

// appendFlat writes {"error": code, "feature"?, "unit"?, "limit"?, "used"?}.
// limit and used belong to metered denials, which always name their unit.
func appendFlat(b []byte, e *control.Error) []byte {
	b = append(b, `{"error":`...)
	b = appendString(b, e.Code)
	if e.Feature != "" {
		b = append(b, `,"feature":`...)
		b = appendString(b, e.Feature)
	}
	if e.Unit != "" {
		b = append(b, `,"unit":`...)
		b = appendString(b, e.Unit)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, e.Limit, 10)
		b = append(b, `,"used":`...)
		b = strconv.AppendInt(b, e.Used, 10)
	}
	return append(b, '}')
}

// appendString appends s as a JSON string, escaped as encoding/json does.
func appendString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }

func appendStringBytes(b []byte, s []byte) []byte {
	return appendString(b, b2s(s))
}

// jsonFields appends `,"name":` (or `"name":` as the first field).
func appendKey(b []byte, first bool, name string) []byte {
	if !first {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	return append(b, '"', ':')
}
