package gateway

import (
	"net/http"

	"voicesvc/control"
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

	control.ENotFound: 404, control.EMethodNotAllowed: 405,
	control.EVoiceBusy: 409, control.EIdempotencyInProgress: 409,
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

// statusOf maps a code to its HTTP status; unknown codes are 500.
func statusOf(code string) int {
	if s, ok := statusByCode[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// isFlat: the error is answered with the flat billing body.
func isFlat(e *control.Error) bool { return flatCodes[e.Code] }

// wireCode is the code sent to clients; a plain 401 carries none.
func wireCode(e *control.Error) string {
	if e.Code == control.EUnauthorized {
		return ""
	}
	return e.Code
}
