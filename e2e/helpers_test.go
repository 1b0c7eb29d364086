// Package e2e holds the acceptance tests that run the real voicesvc binary:
// one or two servers on one store, driven over HTTP and the admin CLI.
package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/e2e/harness"
)

// pgDSN returns a DSN of VOICESVC_TEST_PG whose search_path is a fresh
// schema, dropped when the test ends. Unset: skip, or fail when CI=true.
func pgDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv("VOICESVC_TEST_PG")
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("VOICESVC_TEST_PG is unset but CI=true: the Postgres acceptance tests are required in CI")
		}
		t.Skip("VOICESVC_TEST_PG is unset; set it (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the Postgres acceptance tests")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "e2e_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to VOICESVC_TEST_PG: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, base); err == nil {
			c.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			c.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("VOICESVC_TEST_PG must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx passes unknown parameters as session settings
	u.RawQuery = q.Encode()
	return u.String()
}

// sqliteDSN is a fresh SQLite store in the test's directory.
func sqliteDSN(t testing.TB) string { return "sqlite://" + t.TempDir() + "/voicesvc.db" }

// refArgs run the reference engine in-process; rtf paces it (0: unpaced).
func refArgs(rtf float64, extra ...string) []string {
	return append([]string{"--engine", "reference", "--reference-rtf", strconv.FormatFloat(rtf, 'f', -1, 64),
		"--engine-workers", "0"}, extra...)
}

// client allows many parallel connections to one server.
var client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
	MaxIdleConns: 2000, MaxIdleConnsPerHost: 1000, MaxConnsPerHost: 0, IdleConnTimeout: 30 * time.Second,
}}

// resp is a read response.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// code is the error code of an envelope, or the flat body's error string.
func (r *resp) code() string {
	var m map[string]any
	if json.Unmarshal(r.body, &m) != nil {
		return ""
	}
	if c, ok := m["code"].(string); ok {
		return c
	}
	if c, ok := m["error"].(string); ok {
		return c
	}
	return ""
}

// outcome is "200" or "401 token_invalid".
func (r *resp) outcome() string {
	if r == nil {
		return "transport error"
	}
	s := strconv.Itoa(r.status)
	if c := r.code(); c != "" && r.status >= 400 {
		s += " " + c
	}
	return s
}

// data decodes a success envelope's data.
func (r *resp) data(t testing.TB) map[string]any {
	t.Helper()
	var m struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.body, &m); err != nil || m.Data == nil {
		t.Fatalf("not a success envelope (%d): %.300s", r.status, r.body)
	}
	return m.Data
}

// call sends a request; body is a string or a value sent as JSON; headers
// are name, value pairs. A transport error returns nil.
func call(method, u string, body any, headers ...string) *resp {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hr, err := client.Do(req)
	if err != nil {
		return nil
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil
	}
	return &resp{status: hr.StatusCode, header: hr.Header, body: b}
}

// mustCall is call that fails the test on a transport error.
func mustCall(t testing.TB, method, u string, body any, headers ...string) *resp {
	t.Helper()
	r := call(method, u, body, headers...)
	if r == nil {
		t.Fatalf("%s %s: transport error", method, u)
	}
	return r
}

func keyHdr(k string) []string    { return []string{"X-API-Key", k} }
func bearerHdr(t string) []string { return []string{"Authorization", "Bearer " + t} }

// env is a workspace on a store with its key and a usable voice.
type env struct {
	db, ws, key, voice string
}

// newEnv makes a workspace on plan, applies the workspace update flags
// (e.g. "--rps", "0"), and picks a ready public voice from srv.
func newEnv(t testing.TB, srv *harness.Server, plan string, update ...string) *env {
	t.Helper()
	ws, key := harness.Workspace(t, srv.DB, plan)
	if len(update) > 0 {
		harness.Admin(t, srv.DB, append([]string{"workspace", "update", "--id", ws}, update...)...)
	}
	e := &env{db: srv.DB, ws: ws, key: key}
	r := mustCall(t, "GET", srv.API+"/voices?page_size=100", nil, keyHdr(key)...)
	for _, v := range r.data(t)["voices"].([]any) {
		if m := v.(map[string]any); m["status"] == "ready" {
			e.voice = m["id"].(string)
			break
		}
	}
	if e.voice == "" {
		t.Fatalf("no ready voice: %.300s", r.body)
	}
	return e
}

// token mints an access token with key on srv.
func (e *env) token(t testing.TB, srv *harness.Server, body any) string {
	t.Helper()
	r := mustCall(t, "POST", srv.API+"/tokens", body, keyHdr(e.key)...)
	if r.status != 201 {
		t.Fatalf("POST /tokens: %d %s", r.status, r.body)
	}
	return r.data(t)["token"].(string)
}

func (e *env) speakURL(srv *harness.Server) string { return srv.API + "/voices/" + e.voice + "/speak" }

// poll calls cond every 50 ms until it holds or limit passes.
func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
