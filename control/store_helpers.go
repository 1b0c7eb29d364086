package control

import (
	"encoding/json"
	"fmt"
	"time"
)

// Helpers shared by the storage packages, so that both stores compute
// billing splits, defaults and expiry the same way.

// IdempotencyTTL is how long an Idempotency-Key is remembered.
const IdempotencyTTL = 24 * time.Hour

// DefaultJobType is stored when a job is created without a type.
const DefaultJobType = "instant_clone"

// JobExpiredError is the error of a job that no worker started in time.
var JobExpiredError = JobError{Code: "job_expired", Message: "no worker started the job within 1 hour"}

// SplitCharge decides how chars characters are taken from a month in which
// used of allowance characters are spent and credits are left: the allowance
// first, then credits. With enforce a charge that is not covered in full is
// refused whole with the flat-body details filled. Without enforce the part
// covered by neither is counted against the allowance anyway (used may exceed
// the allowance), so that metering never loses characters.
func SplitCharge(allowance, used, credits, chars int64, enforce bool) (fromAllowance, fromCredits int64, err *Error) {
	left := allowance - used
	if left < 0 {
		left = 0
	}
	fromAllowance = min(chars, left)
	rest := chars - fromAllowance
	fromCredits = min(rest, credits)
	if rest > fromCredits {
		if enforce {
			code, msg := EQuotaExhausted, "monthly character allowance exhausted"
			if credits > 0 {
				code, msg = EInsufficientCredits, "not enough credits for this request"
			}
			e := Errorf(code, "%s", msg)
			e.Unit, e.Limit, e.Used = "character", allowance, used
			return 0, 0, e
		}
		fromAllowance += rest - fromCredits
	}
	return fromAllowance, fromCredits, nil
}

// ListPage normalizes a voice filter's page and page size (1-based page,
// default size 50) and returns the SQL offset and limit.
func ListPage(f VoiceFilter) (offset, limit int) {
	page, size := f.Page, f.PageSize
	if page < 1 {
		page = 1
	}
	if size < 1 {
		size = 50
	}
	return (page - 1) * size, size
}

// ReplayIdempotent decides what a repeated Idempotency-Key gets from its
// stored row: EIdempotencyKeyReused for a different request,
// EIdempotencyInProgress while the first runs, else the stored response.
func ReplayIdempotent(storedFP, fp, state string, headers []byte, r IdempotentResponse) (*IdempotentResponse, error) {
	if storedFP != fp {
		return nil, Errorf(EIdempotencyKeyReused, "idempotency key was used for a different request")
	}
	if state != "done" {
		return nil, Errorf(EIdempotencyInProgress, "a request with this idempotency key is in progress")
	}
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &r.Headers); err != nil {
			return nil, fmt.Errorf("idempotency headers: %w", err)
		}
	}
	if r.Body == nil {
		r.Body = []byte{}
	}
	return &r, nil
}

// EncodeIdempotent encodes a finished response for its row: the headers as
// a JSON object ("{}" for none) and the body, never NULL.
func EncodeIdempotent(resp *IdempotentResponse) (headers string, body []byte, err error) {
	h, err := json.Marshal(resp.Headers)
	if err != nil {
		return "", nil, err
	}
	if resp.Headers == nil {
		h = []byte("{}")
	}
	body = resp.Body
	if body == nil {
		body = []byte{}
	}
	return string(h), body, nil
}
