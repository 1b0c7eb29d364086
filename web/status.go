package web

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/valyala/bytebufferpool"

	"voicesvc/control"
	"voicesvc/jsonw"

	"github.com/valyala/fasthttp"
)

// statusByCode is the one table from an error code to its HTTP status
// (docs/api.md#error-codes). Codes are the domain's (control); the status
// is this transport's business. A code missing here is answered 500.
var statusByCode = map[string]int{
	control.EInvalidJSON: 400, control.ETextRequired: 400, control.ETextTooLong: 400,
	control.EVoiceNotReady: 400, control.EInvalidOutputFormat: 400, control.EInvalidSampleRate: 400,
	control.EInvalidNumStep: 400, control.EInvalidExpressive: 400, control.EInvalidLanguage: 400,
	control.EInvalidSettings: 400, control.EFileRequired: 400, control.EFileTooLarge: 400,
	control.ERefTextTooLong: 400, control.EConsentRequired: 400, control.EInvalidTTL: 400,
	control.EInvalidVoiceID: 400, control.EInvalidPage: 400, control.EInvalidRequest: 400,
	control.EUnsupportedFormat: 400, control.EInvalidSpeed: 400,

	control.EUnauthorized: 401, control.EKeyExpired: 401, control.ETokenInvalid: 401,

	control.EQuotaExhausted: 402, control.EInsufficientCredits: 402,

	control.EInsufficientScope: 403, control.EVoiceNotAllowed: 403, control.EFeatureDisabled: 403,
	control.EOriginNotAllowed: 403,

	control.ENotFound: 404, control.EMethodNotAllowed: 405,
	control.EVoiceBusy: 409, control.EIdempotencyInProgress: 409, control.EAliasTaken: 409,
	control.EPayloadTooLarge: 413,
	control.EInvalidInput:    422, control.EIdempotencyKeyReused: 422,

	control.ERateLimited: 429, control.EConcurrencyLimited: 429, control.ETooManySessions: 429,

	control.EInternal: 500, control.EUpstreamError: 502, control.EUpstreamBusy: 503,
	control.EUnavailable: 503, control.EStoreUnavailable: 503, control.EShuttingDown: 503,
}

// flatCodes are answered with the flat billing body ({"error": "<code>",
// ...}, docs/api.md#flat-billing-body) instead of the envelope.
var flatCodes = map[string]bool{
	control.EQuotaExhausted: true, control.EInsufficientCredits: true, control.EFeatureDisabled: true,
}

// StatusOf maps a code to its HTTP status; unknown codes are 500.
func StatusOf(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// IsFlat: the error is answered with the flat billing body.
func IsFlat(e *control.Error) bool { return flatCodes[e.Code] }

// WireCode is the code sent to clients; a plain 401 carries none.
func WireCode(e *control.Error) string {
	if e.Code == control.EUnauthorized {
		return ""
	}
	return e.Code
}

var hdrRequestID = []byte("X-Request-Id")

// RequestID is the id the server stamped on the response (X-Request-Id).
func RequestID(ctx *fasthttp.RequestCtx) []byte {
	return ctx.Response.Header.PeekBytes(hdrRequestID)
}

// AppendEnvelopeError writes the failure envelope of docs/api.md#envelope
// ({"status","error":true,"message","code","request_id"}), or the flat
// body of billing and plan denials: the native API's error shape.
func AppendEnvelopeError(b []byte, ctx *fasthttp.RequestCtx, e *control.Error, status int) []byte {
	if IsFlat(e) {
		return AppendFlat(b, e)
	}
	b = append(b, `{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"error":true,"message":`...)
	b = jsonw.AppendString(b, e.Message)
	if code := WireCode(e); code != "" {
		b = append(b, `,"code":`...)
		b = jsonw.AppendString(b, code)
	}
	b = append(b, `,"request_id":`...)
	b = jsonw.AppendString(b, string(RequestID(ctx)))
	return append(b, '}')
}

// WriteData answers with the native success envelope of
// docs/api.md#envelope, {"status": N, "data": ..., "error": false}, whose
// data appendData writes (JSON appended by hand, or Marshal).
func WriteData(ctx *fasthttp.RequestCtx, status int, appendData func([]byte) []byte) {
	buf := bytebufferpool.Get()
	b := append(buf.B[:0], `{"status":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"data":`...)
	b = appendData(b)
	b = append(b, `,"error":false}`...)
	ctx.SetStatusCode(status)
	ctx.Response.Header.SetContentType("application/json")
	ctx.Response.SetBody(b)
	buf.B = b
	bytebufferpool.Put(buf)
}

// Marshal appends v with encoding/json, for data that is neither frequent
// nor large. Only unsupported types fail: a programming error, never input.
func Marshal(v any) func([]byte) []byte {
	return func(b []byte) []byte {
		out, err := json.Marshal(v)
		if err != nil {
			panic("web: cannot marshal data: " + err.Error())
		}
		return append(b, out...)
	}
}

// AppendFlat writes {"error": code, "feature"?, "unit"?, "limit"?, "used"?}.
// limit and used belong to metered denials, which always name their unit.
func AppendFlat(b []byte, e *control.Error) []byte {
	b = append(b, `{"error":`...)
	b = jsonw.AppendString(b, e.Code)
	if e.Feature != "" {
		b = append(b, `,"feature":`...)
		b = jsonw.AppendString(b, e.Feature)
	}
	if e.Unit != "" {
		b = append(b, `,"unit":`...)
		b = jsonw.AppendString(b, e.Unit)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, e.Limit, 10)
		b = append(b, `,"used":`...)
		b = strconv.AppendInt(b, e.Used, 10)
	}
	return append(b, '}')
}

// APIRoot is the path prefix of every public API route.
const APIRoot = "/voice-svc/api/v1/public"
