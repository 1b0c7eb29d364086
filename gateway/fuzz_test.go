package gateway

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/valyala/fasthttp"
)

// Seeds live in testdata/fuzz/<name>/; `go test` runs them, `go test
// -fuzz=FuzzAPIKeyHeader ./gateway` explores further.

// FuzzAPIKeyHeader sends arbitrary X-API-Key and Authorization headers
// through the whole handler (with the real store) and checks that the
// answer is always a well-formed 200, 401 or 403.
func FuzzAPIKeyHeader(f *testing.F) {
	db := openStore(f, filepath.Join(f.TempDir(), "fuzz.db"))
	srv, err := New(Config{}, Deps{Store: db, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Shutdown(f.Context()) })
	ts := &testServer{t: f, store: db, srv: srv}
	ws := ts.workspace("free")
	valid := ts.newKey(ws.ID, nil, 0, false)
	f.Add(valid, "")
	f.Add("", "Bearer "+valid)
	h := srv.Handler()

	f.Fuzz(func(t *testing.T, apiKey, authorization string) {
		var req fasthttp.Request
		req.SetRequestURI(APIRoot + "/voices")
		if apiKey != "" {
			req.Header.Set("X-API-Key", apiKey)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, nil, nil)
		h(&ctx)
		status := ctx.Response.StatusCode()
		var body map[string]any
		if err := json.Unmarshal(ctx.Response.Body(), &body); err != nil {
			t.Fatalf("status %d, body not JSON: %q", status, ctx.Response.Body())
		}
		if len(ctx.Response.Header.Peek("X-Request-Id")) == 0 {
			t.Fatal("no X-Request-Id")
		}
		sent := string(req.Header.Peek("X-API-Key")) // as the server saw it
		switch status {
		case 200:
			if sent != valid {
				t.Fatalf("accepted %q / %q", apiKey, authorization)
			}
		case 401:
			if _, has := body["code"]; has {
				t.Fatalf("401 with a code for %q: %v", apiKey, body)
			}
			if sent == valid {
				t.Fatalf("refused the valid key")
			}
		default:
			t.Fatalf("status %d for %q / %q: %v", status, apiKey, authorization, body)
		}
	})
}
