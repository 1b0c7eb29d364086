package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/control/sqlite"
)

// testServer is a gateway serving real HTTP on a loopback port, backed by
// a real SQLite store in a temporary directory.
type testServer struct {
	t     testing.TB
	store *sqlite.DB
	srv   *Server
	base  string // http://127.0.0.1:port
	ws    *control.Workspace
	key   string // all scopes
	// strict: the server must shut down clean (start sets it).
	strict bool
}

func openStore(t testing.TB, path string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTestServer starts a server on a fresh store. With a non-empty path the
// store file is shared (several servers on one database).
func newTestServer(t testing.TB, path string) *testServer {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "voicesvc.db")
	}
	ts := &testServer{t: t, store: openStore(t, path)}
	ts.start()
	ts.ws = ts.workspace("pro")
	ts.key = ts.newKey(ts.ws.ID, nil, 0, false)
	return ts
}

func (ts *testServer) start() {
	ts.t.Helper()
	ts.serve(Config{}, Deps{})
	ts.strict = true
}

// serve runs a server with cfg and deps (the test's store and a silent
// logger unless deps name their own) on a loopback port until the test
// ends.
func (ts *testServer) serve(cfg Config, deps Deps) *Server {
	t := ts.t
	t.Helper()
	if deps.Store == nil {
		deps.Store = ts.store
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	srv, err := New(cfg, deps)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := srv.Shutdown(ctx)
		if serr := <-done; ts.strict && (err != nil || serr != nil) {
			// start's servers must end clean; the others may have left a
			// stream open on purpose.
			t.Errorf("Shutdown: %v, Serve: %v", err, serr)
		}
	})
	ts.srv, ts.base = srv, "http://"+ln.Addr().String()
	return srv
}

func (ts *testServer) workspace(plan string) *control.Workspace {
	ts.t.Helper()
	w := &control.Workspace{Name: "test", Plan: plan}
	if err := ts.store.CreateWorkspace(context.Background(), w); err != nil {
		ts.t.Fatal(err)
	}
	return w
}

// newKey creates a key of ws; nil scopes means all four.
func (ts *testServer) newKey(ws string, scopes []string, expiresAt int64, legacy bool) string {
	ts.t.Helper()
	if scopes == nil {
		scopes = control.AllScopes
	}
	secret, hash := control.NewAPIKeySecret()
	k := &control.APIKey{WorkspaceID: ws, Hash: hash, Scopes: scopes, ExpiresAt: expiresAt, Legacy: legacy}
	if err := ts.store.CreateAPIKey(context.Background(), k); err != nil {
		ts.t.Fatal(err)
	}
	return secret
}

// response is a decoded answer.
type response struct {
	status int
	header http.Header
	body   []byte
	json   map[string]any
	api    bool // an API route: CORS expected
}

// do sends a request; key "" sends no X-API-Key; body is a string, bytes
// or a value sent as JSON; headers are name, value pairs.
func (ts *testServer) do(method, path, key string, body any, headers ...string) *response {
	ts.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			ts.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	// Paths are relative to the API root; "!/healthz" addresses the host root.
	url := ts.base + APIRoot + path
	if strings.HasPrefix(path, "!") {
		url = ts.base + path[1:]
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		ts.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		ts.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	r := &response{status: resp.StatusCode, header: resp.Header, api: !strings.HasPrefix(path, "!")}
	r.body, _ = io.ReadAll(resp.Body)
	if len(r.body) > 0 && r.body[0] == '{' {
		if err := json.Unmarshal(r.body, &r.json); err != nil {
			ts.t.Fatalf("%s %s: body is not JSON: %v: %s", method, path, err, r.body)
		}
	}
	return r
}

// data returns the success envelope's data after checking its shape.
func (r *response) data(t testing.TB, status int) map[string]any {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if r.json["error"] != false || r.json["status"] != float64(status) || len(r.json) != 3 {
		t.Fatalf("not a success envelope: %s", r.body)
	}
	d, ok := r.json["data"].(map[string]any)
	if !ok {
		t.Fatalf("data is not an object: %s", r.body)
	}
	if r.header.Get("X-Request-Id") == "" {
		t.Fatalf("no X-Request-Id")
	}
	return d
}

// failure checks a failure envelope: status, code (absent when code is
// ""), message, and request_id equal to the X-Request-Id header.
func (r *response) failure(t testing.TB, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	j := r.json
	if j == nil {
		t.Fatalf("body is not a JSON object: %q", r.body)
	}
	want := map[string]bool{"status": true, "error": true, "message": true, "request_id": true, "code": code != ""}
	for k := range j {
		if !want[k] {
			t.Errorf("unexpected field %q in %s", k, r.body)
		}
	}
	if j["error"] != true || j["status"] != float64(status) {
		t.Errorf("bad envelope: %s", r.body)
	}
	if m, _ := j["message"].(string); m == "" {
		t.Errorf("no message: %s", r.body)
	}
	if code == "" {
		if _, ok := j["code"]; ok {
			t.Errorf("code present on plain %d: %s", status, r.body)
		}
	} else if j["code"] != code {
		t.Errorf("code %v, want %s: %s", j["code"], code, r.body)
	}
	id := r.header.Get("X-Request-Id")
	if id == "" || j["request_id"] != id {
		t.Errorf("request_id %v, header %q", j["request_id"], id)
	}
	if r.api && r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("no CORS header on error")
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("content type %q", ct)
	}
}

// createVoice makes a draft voice in the workspace of key.
func (ts *testServer) createVoice(key, name string) map[string]any {
	ts.t.Helper()
	r := ts.do("POST", "/voices", key, map[string]any{"name": name, "consent": true})
	return r.data(ts.t, 201)["voice"].(map[string]any)
}

// waitLive waits until the server trusts its caches (its change feed
// runs), so that what a test reads next is served from the cache.
func (ts *testServer) waitLive() {
	ts.t.Helper()
	if _, ok := waitFor(10*time.Second, func() bool { return ts.srv.core.KeysLive() && ts.srv.core.Voices().Live() }); !ok {
		ts.t.Fatal("caches never became live")
	}
}

// waitFor polls cond until it holds or limit passes; it returns how long
// it took (or limit when it never held).
func waitFor(limit time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > limit {
			return limit, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}
