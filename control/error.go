package control

import (
	"errors"
	"fmt"
	"math"
)

// Error codes. Every error a client can see carries one of these; the
// gateway's one table (gateway/status.go) maps each to its HTTP status, so
// handlers never choose a status.
const (
	// 400
	EInvalidJSON         = "invalid_json"
	ETextRequired        = "text_required"
	ETextTooLong         = "text_too_long"
	EVoiceNotReady       = "voice_not_ready"
	EInvalidOutputFormat = "invalid_output_format"
	EInvalidSampleRate   = "invalid_sample_rate"
	EInvalidNumStep      = "invalid_num_step"
	EInvalidExpressive   = "invalid_expressiveness"
	EInvalidSpeed        = "invalid_speed"
	EInvalidLanguage     = "invalid_language"
	EInvalidSettings     = "invalid_settings"
	EFileRequired        = "file_required"
	EFileTooLarge        = "file_too_large"
	ERefTextTooLong      = "ref_text_too_long"
	EConsentRequired     = "consent_required"
	EInvalidTTL          = "invalid_ttl"
	EInvalidVoiceID      = "invalid_voice_id"
	EInvalidPage         = "invalid_page"
	EInvalidRequest      = "invalid_request"
	EUnsupportedFormat   = "unsupported_response_format"

	// 401. EUnauthorized is sent without a code (docs/api.md#api-keys).
	EUnauthorized = "unauthorized"
	EKeyExpired   = "key_expired"
	ETokenInvalid = "token_invalid"

	// 402, 403 flat bodies (billing and plan denials).
	EQuotaExhausted      = "quota_exhausted"
	EInsufficientCredits = "insufficient_credits"
	EFeatureDisabled     = "feature_disabled"

	// 403
	EInsufficientScope = "insufficient_scope"
	EOriginNotAllowed  = "origin_not_allowed"
	EVoiceNotAllowed   = "voice_not_allowed"

	// 404, 405, 409, 413, 422
	ENotFound              = "not_found"
	EMethodNotAllowed      = "method_not_allowed"
	EVoiceBusy             = "voice_busy"
	EAliasTaken            = "alias_taken" // a workspace alias another voice of the workspace holds
	EIdempotencyInProgress = "idempotency_in_progress"
	EPayloadTooLarge       = "payload_too_large"
	EInvalidInput          = "invalid_input"
	EIdempotencyKeyReused  = "idempotency_key_reused"

	// 429
	ERateLimited        = "rate_limited"
	EConcurrencyLimited = "concurrency_limited"
	ETooManySessions    = "too_many_sessions"

	// 5xx
	EInternal      = "internal"
	EUpstreamError = "upstream_error"
	EUpstreamBusy  = "upstream_busy"
	EUnavailable   = "unavailable"
	// EStoreUnavailable: the store cannot be reached (connection refused or
	// reset, no connection to be had); a retry after Retry-After may land.
	EStoreUnavailable = "store_unavailable"
	// EShuttingDown: the server is draining before it exits; another
	// server (or this one, restarted) takes the retry.
	EShuttingDown = "shutting_down"
)

// Error is the one error type of the service. It carries everything a
// transport needs to answer: the code (each transport maps it to its own
// status: gateway/status.go for HTTP), a message safe to show the client,
// and the details of billing denials and retry hints.
type Error struct {
	Code    string
	Message string

	// RetryAfter, in whole seconds, for 429 and 503.
	RetryAfter int

	// Param names the request field at fault, as the protocol spells it
	// (the compatible endpoint's error "param"); "" when none.
	Param string

	// Flat-body details for billing and plan denials.
	Feature string
	Unit    string
	Limit   int64
	Used    int64

	// Cause is the error behind this one, for logs only: never shown to a
	// client (store_unavailable carries the driver's error here).
	Cause error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause, so that errors.Is sees a deadline or a driver
// error behind a store_unavailable.
func (e *Error) Unwrap() error { return e.Cause }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err if it is (or wraps) an *Error (an
// unreachable store is one: the stores return StoreUnavailableError), and
// EInternal otherwise.
func ErrorCode(err error) string {
	if err == nil {
		return "" // before errors.As, whose target escapes: no allocation on success paths
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// AsError returns err as an *Error; anything else becomes an internal error
// whose detail is not shown to clients (the caller logs it).
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: EInternal, Message: "internal error"}
}

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool { return ErrorCode(err) == code }

// RateLimited is the refusal of a request-rate check: ERateLimited with a
// Retry-After of the whole seconds, at least 1, until one more request would
// be admitted.
func RateLimited(d RateDecision) *Error {
	wait := int(math.Ceil(d.ResetAfter))
	if wait < 1 {
		wait = 1
	}
	return &Error{Code: ERateLimited, Message: "too many requests per second for this workspace", RetryAfter: wait}
}
