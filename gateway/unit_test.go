package gateway

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

func TestFlatBody(t *testing.T) {
	e := control.Errorf(control.EQuotaExhausted, "x")
	e.Unit, e.Limit, e.Used = "character", 10000, 9990
	if got := string(web.AppendFlat(nil, e)); got != `{"error":"quota_exhausted","unit":"character","limit":10000,"used":9990}` {
		t.Errorf("quota: %s", got)
	}
	f := control.Errorf(control.EFeatureDisabled, "x")
	f.Feature = "streaming"
	if got := string(web.AppendFlat(nil, f)); got != `{"error":"feature_disabled","feature":"streaming"}` {
		t.Errorf("feature: %s", got)
	}
}

func TestRequestIDShape(t *testing.T) {
	var buf [28]byte
	a := string(newRequestID(&buf))
	b := string(newRequestID(&buf))
	if !generatedID.MatchString(a) || a == b {
		t.Errorf("ids %q %q", a, b)
	}
	for id, ok := range map[string]bool{"a": true, " x ": true, "\x7f": false, "\t": false, "": false} {
		if validRequestID([]byte(id)) != ok {
			t.Errorf("validRequestID(%q) != %v", id, ok)
		}
	}
}

func TestRequestConfig(t *testing.T) {
	// The protocols' routes say which of them stream (web.Route.Streams).
	s, err := New(Config{}, Deps{Store: openStore(t, filepath.Join(t.TempDir(), "voicesvc.db"))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(t.Context())
	tests := []struct {
		uri      string
		body     int
		longRead bool
		stream   bool
	}{
		{APIRoot + "/voices", 256 << 10, false, false},
		// Uploads: fasthttp reads one byte before the handler, which
		// authenticates, then streams the body (uploadbody.go).
		{APIRoot + "/voices/clone", 1, true, false},
		{APIRoot + "/voices/0123456789abcdef01234567/enroll?x=1", 1, true, false},
		{APIRoot + "/voices/0123456789abcdef01234567/stream", 256 << 10, false, true},
		{APIRoot + "/compat/audio/speech", 256 << 10, false, true},
		{APIRoot + "/compat/openai/audio/speech", 256 << 10, false, true},
		{APIRoot + "/voices/0123456789abcdef01234567/speak", 256 << 10, false, true},
		// A streaming route whose path ends in its parameter.
		{APIRoot + "/compat/elevenlabs/v1/text-to-speech/21m00Tcm4TlvDq8ikWAM?output_format=pcm_16000", 256 << 10, false, true},
		{APIRoot + "/compat/elevenlabs/v1/text-to-speech/x/with-timestamps", 256 << 10, false, true},
		{APIRoot + "/compat/elevenlabs/v1/text-to-speech/x/nothing", 256 << 10, false, false},
		{APIRoot + "/compat/elevenlabs/v1/voices", 256 << 10, false, false},
		{"/healthz", 256 << 10, false, false},
	}
	for _, tt := range tests {
		var h fasthttp.RequestHeader
		h.SetRequestURI(tt.uri)
		c := s.requestConfig(&h)
		if c.MaxRequestBodySize != tt.body || (c.ReadTimeout > 0) != tt.longRead || (c.WriteTimeout > 0) != tt.stream {
			t.Errorf("%s: %+v", tt.uri, c)
		}
	}
}

func TestWriteError(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	quota := &control.Error{Code: control.EQuotaExhausted, Message: "m", Unit: "character", Limit: 10, Used: 10}
	tests := []struct {
		err    error
		status int
		body   string
		retry  string
	}{
		{&control.Error{Code: control.ERateLimited, Message: "slow down", RetryAfter: 3}, 429,
			`{"status":429,"error":true,"message":"slow down","code":"rate_limited","request_id":"req_x"}`, "3"},
		{quota, 402, `{"error":"quota_exhausted","unit":"character","limit":10,"used":10}`, ""},
		{control.Errorf(control.EUnauthorized, "no key"), 401,
			`{"status":401,"error":true,"message":"no key","request_id":"req_x"}`, ""},
		{io.ErrUnexpectedEOF, 500,
			`{"status":500,"error":true,"message":"internal error","code":"internal","request_id":"req_x"}`, ""},
		{fmt.Errorf("wrapped: %w", control.Errorf(control.ENotFound, "gone")), 404,
			`{"status":404,"error":true,"message":"gone","code":"not_found","request_id":"req_x"}`, ""},
	}
	for _, tt := range tests {
		var ctx fasthttp.RequestCtx
		ctx.Response.Header.Set("X-Request-Id", "req_x")
		s.writeError(&ctx, tt.err)
		if ctx.Response.StatusCode() != tt.status || string(ctx.Response.Body()) != tt.body ||
			string(ctx.Response.Header.Peek("Retry-After")) != tt.retry {
			t.Errorf("%v: %d %s (Retry-After %q)", tt.err, ctx.Response.StatusCode(), ctx.Response.Body(),
				ctx.Response.Header.Peek("Retry-After"))
		}
	}
}
