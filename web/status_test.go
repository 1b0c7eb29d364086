package web

import (
	"testing"

	"voicesvc/control"
)

// TestStatusTable: every code has its status, the billing denials use the
// flat body, and a plain 401 carries no code.
func TestStatusTable(t *testing.T) {
	for code, want := range map[string]int{
		control.EInvalidJSON: 400, control.ETextTooLong: 400, control.EUnauthorized: 401,
		control.EQuotaExhausted: 402, control.EFeatureDisabled: 403, control.ENotFound: 404,
		control.EPayloadTooLarge: 413, control.EInvalidInput: 422, control.ERateLimited: 429,
		control.EUpstreamError: 502, control.EUpstreamBusy: 503, control.EStoreUnavailable: 503,
		control.EShuttingDown: 503, "no_such_code": 500,
	} {
		if got := StatusOf(code); got != want {
			t.Errorf("%s: %d, want %d", code, got, want)
		}
	}
	for code, flat := range map[string]bool{control.EQuotaExhausted: true, control.EInsufficientCredits: true,
		control.EFeatureDisabled: true, control.ERateLimited: false, control.EInvalidJSON: false} {
		if got := IsFlat(&control.Error{Code: code}); got != flat {
			t.Errorf("%s flat %v, want %v", code, got, flat)
		}
	}
	if WireCode(&control.Error{Code: control.EUnauthorized}) != "" || WireCode(&control.Error{Code: control.EKeyExpired}) != control.EKeyExpired {
		t.Error("wire codes")
	}
}
