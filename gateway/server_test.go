package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
)

var generatedID = regexp.MustCompile(`^req_[0-9a-f]{24}$`)

func TestRequestID(t *testing.T) {
	ts := newTestServer(t, "")
	tests := []struct {
		name, method, path, key, incoming string
		keep                              bool
	}{
		{"generated on success", "GET", "/voices", ts.key, "", false},
		{"kept", "GET", "/voices", ts.key, "trace-42 abc", true},
		{"kept on 401", "GET", "/voices", "", "my-id", true},
		{"too long replaced", "GET", "/voices", ts.key, strings.Repeat("a", 129), false},
		{"128 kept", "GET", "/voices", ts.key, strings.Repeat("b", 128), true},
		{"non-ASCII replaced", "GET", "/voices", ts.key, "é", false},
		{"healthz", "GET", "!/healthz", "", "", false},
		{"readyz", "GET", "!/readyz", "", "", false},
		{"metrics", "GET", "!/metrics", "", "", false},
		{"unknown route", "GET", "/nope", "", "", false},
		{"405", "DELETE", "/voices", ts.key, "x405", true},
		{"preflight", "OPTIONS", "/voices", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h []string
			if tt.incoming != "" {
				h = []string{"X-Request-Id", tt.incoming}
			}
			got := ts.do(tt.method, tt.path, tt.key, nil, h...).header.Get("X-Request-Id")
			if tt.keep && got != tt.incoming || !tt.keep && !generatedID.MatchString(got) {
				t.Errorf("X-Request-Id %q (incoming %q)", got, tt.incoming)
			}
		})
	}
}

func TestCORS(t *testing.T) {
	ts := newTestServer(t, "")
	r := ts.do("OPTIONS", "/voices/"+control.NewID()+"/speak", "", nil,
		"Origin", "https://app.example", "Access-Control-Request-Method", "POST",
		"Access-Control-Request-Headers", "x-api-key, content-type")
	if r.status != 204 || len(r.body) != 0 {
		t.Fatalf("preflight: %d %s", r.status, r.body)
	}
	for h, want := range map[string]string{
		"Access-Control-Allow-Origin":  "*",
		"Access-Control-Allow-Methods": "POST",
		"Access-Control-Allow-Headers": "x-api-key, content-type",
	} {
		if !strings.Contains(r.header.Get(h), want) {
			t.Errorf("%s = %q", h, r.header.Get(h))
		}
	}
	// Whatever header names the browser asks for are allowed (SDKs send
	// their own, x-stainless-*); no list, or one that is not header names,
	// gets the fixed list.
	fixed := "X-API-Key, Authorization, Content-Type, Idempotency-Key, X-Request-Id"
	stainless := "authorization,content-type,x-stainless-arch,x-stainless-lang,x-stainless-os," +
		"x-stainless-package-version,x-stainless-retry-count,x-stainless-runtime,x-stainless-runtime-version,x-stainless-timeout"
	for _, tc := range []struct{ asked, want string }{
		{stainless, stainless},
		{"", fixed},
		{"x-a, x-b;evil=1", fixed},
		{"x-a:b", fixed},
		{strings.Repeat("x-long,", 700), fixed},
	} {
		hdr := []string{"Origin", "https://app.example", "Access-Control-Request-Method", "POST"}
		if tc.asked != "" {
			hdr = append(hdr, "Access-Control-Request-Headers", tc.asked)
		}
		r := ts.do("OPTIONS", "/compat/audio/speech", "", nil, hdr...)
		if got := r.header.Get("Access-Control-Allow-Headers"); r.status != 204 || got != tc.want {
			t.Errorf("asked %.40q: %d, allowed %q", tc.asked, r.status, got)
		}
	}
	// Every API response carries CORS, errors included.
	for _, r := range []*response{
		ts.do("GET", "/voices", ts.key, nil),
		ts.do("GET", "/voices", "", nil),
		ts.do("GET", "/nope", "", nil),
	} {
		if r.header.Get("Access-Control-Allow-Origin") != "*" ||
			!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "X-Request-Id") ||
			!strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "RateLimit-Policy") ||
			!strings.Contains(r.header.Get("Access-Control-Expose-Headers"),
				"X-Sample-Rate, X-Audio-Format, X-Channels, Idempotent-Replayed, Deprecation") {
			t.Errorf("%d: CORS headers missing: %v", r.status, r.header)
		}
	}
}

func TestHealthAndMetrics(t *testing.T) {
	ts := newTestServer(t, "")
	if d := ts.do("GET", "!/healthz", "", nil).data(t, 200); d["status"] != "ok" {
		t.Errorf("healthz: %v", d)
	}
	// No engine wired: not ready.
	ts.do("GET", "!/readyz", "", nil).failure(t, 503, control.EUnavailable)
	ts.do("GET", "/voices", ts.key, nil).data(t, 200)
	m := ts.do("GET", "!/metrics", "", nil)
	for _, want := range []string{
		`voicesvc_http_requests_total{route="GET /voices",status="200"} 1`,
		`voicesvc_http_request_duration_seconds_bucket{route="GET /voices"`,
		`voicesvc_http_requests_total{route="GET /readyz",status="503"} 1`,
		"go_goroutines",
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestRevocationReachesServers: two servers on one SQLite file; a key
// revoked through a third handle (as `voicesvc admin key revoke` does) is
// refused by both, through each one's change feed, although both had it
// cached. The wait is logged; docs/api.md promises 2 seconds.
func TestRevocationReachesServers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	a := newTestServer(t, path)
	b := &testServer{t: t, store: openStore(t, path)}
	b.start()
	admin := openStore(t, path)

	key := a.newKey(a.ws.ID, nil, 0, false)
	for _, s := range []*testServer{a, b} {
		s.waitLive()
		s.do("GET", "/voices", key, nil).data(t, 200)
		if s.srv.core.CachedKeys() == 0 {
			t.Fatal("the key was not cached")
		}
	}
	k, err := admin.GetAPIKeyByHash(context.Background(), control.HashSecret(key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeAPIKey(context.Background(), k.ID, control.NowMS()); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*testServer{"a": a, "b": b} {
		took, ok := waitFor(10*time.Second, func() bool { return s.do("GET", "/voices", key, nil).status == 401 })
		if !ok {
			t.Fatalf("server %s still accepts the revoked key", name)
		}
		t.Logf("server %s refused the revoked key after %v", name, took)
		s.do("GET", "/voices", key, nil).failure(t, 401, "")
	}
}

// A plan change reaches the cached principal the same way.
func TestPlanChangeReachesCache(t *testing.T) {
	ts := newTestServer(t, "")
	ts.waitLive()
	ts.do("GET", "/voices", ts.key, nil).data(t, 200)
	p, err := ts.srv.core.AuthKey([]byte(ts.key))
	if err != nil || p.Plan != "pro" || p.Limits.Concurrency != 10 {
		t.Fatalf("principal %+v, %v", p, err)
	}
	plan, conc := "free", 7
	if _, err := ts.store.UpdateWorkspace(context.Background(), ts.ws.ID,
		control.WorkspaceUpdate{Plan: &plan, Concurrency: &conc}); err != nil {
		t.Fatal(err)
	}
	if _, ok := waitFor(10*time.Second, func() bool {
		p, err := ts.srv.core.AuthKey([]byte(ts.key))
		return err == nil && p.Plan == "free" && p.Limits.Concurrency == 7 && p.Limits.RPS == 2
	}); !ok {
		t.Errorf("plan change never reached the cache")
	}
}

// Shutdown lets an in-flight request finish and stops accepting.
func TestShutdown(t *testing.T) {
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "x.db"))}
	srv, err := New(Config{}, Deps{Store: ts.store})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	ts.srv, ts.base = srv, "http://"+ln.Addr().String()
	ts.do("GET", "!/healthz", "", nil).data(t, 200)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Errorf("still accepting after Shutdown")
	}
}

// Upload routes take bodies far over the JSON limit (up to 21 MiB).
func TestUploadBodyLimit(t *testing.T) {
	ts := newTestServer(t, "")
	body := strings.Repeat("x", 1<<20)
	r := ts.do("POST", "/voices/"+control.NewID()+"/enroll", ts.key, body, "Content-Type", "multipart/form-data; boundary=x")
	if r.status == 413 {
		t.Errorf("1 MiB upload refused as too large")
	}
	// Over the limits the answer comes from the Content-Length alone, before
	// any body is read: the requests below send none.
	ts.headersOnly(t, "/voices", "application/json", 1<<20).failure(t, 413, control.EPayloadTooLarge)
	ts.headersOnly(t, "/voices/"+control.NewID()+"/enroll", "multipart/form-data; boundary=x", 21<<20+1).
		failure(t, 413, control.EPayloadTooLarge)
}

// headersOnly POSTs the headers of a request whose body would be length
// bytes, sends no body, and reads the answer. A refusal by size comes before
// the body; a client that went on writing a large body could see its
// connection reset before it read that answer.
func (ts *testServer) headersOnly(t *testing.T, path, contentType string, length int) *response {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "POST %s%s HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		APIRoot, path, ts.key, contentType, length)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &response{status: resp.StatusCode, header: resp.Header, api: true}
	r.body, _ = io.ReadAll(resp.Body)
	if err := json.Unmarshal(r.body, &r.json); err != nil {
		t.Fatalf("%s: body %q is not JSON", path, r.body)
	}
	return r
}

// A connection that times out before sending anything is closed without an
// answer; one that timed out partway through its request gets the 400.
// Before, the silent one got the 400 too, which an HTTP client holding the
// connection as a spare then read as the answer to its next request.
func TestReadTimeoutOfSilentConnection(t *testing.T) {
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "x.db"))}
	ts.serve(Config{ReadTimeout: 200 * time.Millisecond}, Deps{})
	for _, tc := range []struct {
		name   string
		send   string
		answer string // the status line expected; "" for a close without an answer
	}{
		{"nothing sent", "", ""},
		{"half a request line", "GET /heal", "HTTP/1.1 400 Bad Request"},
		{"headers unfinished", "GET /healthz HTTP/1.1\r\nHost: x\r\n", "HTTP/1.1 400 Bad Request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if tc.send != "" {
				if _, err := io.WriteString(c, tc.send); err != nil {
					t.Fatal(err)
				}
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c)
			if err != nil {
				t.Fatalf("read: %v (after %q)", err, got)
			}
			line, _, _ := strings.Cut(string(got), "\r\n")
			if line != tc.answer {
				t.Errorf("answer %q, want %q", line, tc.answer)
			}
		})
	}
}
