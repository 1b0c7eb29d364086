package gateway

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"testing"
	"unicode/utf8"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/langtag"
	"voicesvc/web"
)

// Seeds live in testdata/fuzz/<name>/; `go test` runs them, `go test
// -fuzz=FuzzVoiceCreateBody ./gateway` explores further.

// checkVoiceInput is what any accepted body must satisfy.
func checkVoiceInput(t *testing.T, body []byte, in *voiceInput, err error) {
	if err != nil {
		e, ok := err.(*control.Error)
		if !ok {
			t.Fatalf("error %T %v is not a *control.Error", err, err)
		}
		if s := web.StatusOf(e.Code); s != 400 && s != 413 {
			t.Fatalf("status %d (%s) for a body error", s, e.Code)
		}
		return
	}
	if len(body) > 0 && !json.Valid(body) && len(trimSpace(body)) > 0 {
		t.Fatalf("invalid JSON accepted: %q", body)
	}
	if in.name != nil && (*in.name == "" || utf8.RuneCountInString(*in.name) > maxNameChars) {
		t.Fatalf("bad name accepted: %q", *in.name)
	}
	if in.language != nil {
		if again, ok := langtag.Canonical(*in.language); !ok || again != *in.language {
			t.Fatalf("language %q not canonical", *in.language)
		}
	}
	if in.settings != nil && *in.settings != nil {
		st := *in.settings
		for _, c := range []struct {
			v      *float64
			lo, hi float64
		}{{st.Stability, 0, 1}, {st.Similarity, 0, 1}, {st.Style, 0, 1}, {st.Speed, 0.25, 4}, {st.Pitch, -12, 12}, {st.Volume, 0, 2}} {
			if c.v != nil && (*c.v < c.lo || *c.v > c.hi) {
				t.Fatalf("setting %v out of [%v, %v] accepted", *c.v, c.lo, c.hi)
			}
		}
		// What is accepted can be written back as JSON.
		if b := appendSettings(nil, st); !json.Valid(b) {
			t.Fatalf("settings render as invalid JSON: %s", b)
		}
	}
	if in.labels != nil {
		v := &control.Voice{Labels: *in.labels}
		if b := appendVoice(nil, v, []string{"alloy"}); !json.Valid(b) {
			t.Fatalf("voice renders as invalid JSON: %s", b)
		}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r') {
		b = b[1:]
	}
	return b
}

func FuzzVoiceCreateBody(f *testing.F) {
	f.Add([]byte(`{"name":"a","consent":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := parseVoiceCreate(body, 256<<10)
		checkVoiceInput(t, body, in, err)
		if err == nil && in.name == nil {
			t.Fatalf("create accepted without a name: %q", body)
		}
	})
}

func FuzzVoiceUpdateBody(f *testing.F) {
	f.Add([]byte(`{"settings":{"speed":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := parseVoiceUpdate(body, 256<<10)
		checkVoiceInput(t, body, in, err)
	})
}

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
