package deepgram

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

func TestAuthorization(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"Token vsk_abc", "vsk_abc"},
		{"token vsk_abc", "vsk_abc"},
		{"Bearer vst_tok", "vst_tok"},
		{"BEARER  vsk_abc ", "vsk_abc"},
		{"Basic dXNlcg==", ""},
		{"Token", ""},
		{"vsk_abc", ""},
	} {
		if got := authorization([]byte(tt.header)); string(got) != tt.want || got == nil {
			t.Errorf("%q: %q, want %q", tt.header, got, tt.want)
		}
	}
	if authorization(nil) != nil {
		t.Error("no header is not a refusal")
	}
}

func TestProtocolCredential(t *testing.T) {
	for _, tt := range []struct{ header, want string }{
		{"token, vsk_abc", "vsk_abc"},
		{"token,vsk_abc,x-deepgram-session-id,123", "vsk_abc"},
		{"bearer, vst_tok", "vst_tok"},
		{"x-deepgram-session-id, 1, Token, vsk_abc", "vsk_abc"},
		{"token", ""},
		{"service.v1", ""},
		{"", ""},
	} {
		if got := protocolCredential([]byte(tt.header)); string(got) != tt.want {
			t.Errorf("%q: %q, want %q", tt.header, got, tt.want)
		}
	}
}

// TestAppendError: Deepgram's shape, its category by status and field,
// voicesvc's code (none on a plain 401).
func TestAppendError(t *testing.T) {
	param := func(code, p string) *control.Error {
		e := control.Errorf(code, "m")
		e.Param = p
		return e
	}
	for _, tt := range []struct {
		err      *control.Error
		category string
	}{
		{param(control.EInvalidRequest, "model"), "INVALID_QUERY_PARAMETER"},
		{param(control.EInvalidSampleRate, "sample_rate"), "INVALID_QUERY_PARAMETER"},
		{param(control.EUnsupportedFormat, "encoding"), "INVALID_QUERY_PARAMETER"},
		{param(control.ETextRequired, "text"), "INVALID_REQUEST_BODY"},
		{control.Errorf(control.EInvalidJSON, "m"), "INVALID_REQUEST_BODY"},
		{control.Errorf(control.EUnauthorized, "m"), "INVALID_AUTH"},
		{control.Errorf(control.EQuotaExhausted, "m"), "INSUFFICIENT_CREDITS"},
		{control.Errorf(control.EFeatureDisabled, "m"), "INSUFFICIENT_PERMISSIONS"},
		{control.Errorf(control.ENotFound, "m"), "NOT_FOUND"},
		{control.Errorf(control.EConcurrencyLimited, "m"), "TOO_MANY_REQUESTS"},
		{control.Errorf(control.EUnavailable, "m"), "SERVICE_UNAVAILABLE"},
		{control.Errorf(control.EInternal, "m"), "INTERNAL_SERVER_ERROR"},
	} {
		var ctx fasthttp.RequestCtx
		ctx.Response.Header.Set("X-Request-Id", "req_x")
		b := (&Protocol{}).AppendError(nil, &ctx, tt.err, web.StatusOf(tt.err.Code))
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		wantCode := any(tt.err.Code)
		if tt.err.Code == control.EUnauthorized {
			wantCode = nil
		}
		if got["category"] != tt.category || got["message"] != "m" || got["request_id"] != "req_x" || got["code"] != wantCode {
			t.Errorf("%s: %s", tt.err.Code, b)
		}
	}
}
