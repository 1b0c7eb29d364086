package e2e

import (
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// rawExchange sends raw bytes on a fresh connection, then either closes at
// once (drop) or reads what the server answers until it closes or 5 s pass.
func rawExchange(t *testing.T, addr, req string, drop bool) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	if drop {
		return ""
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}

// No secret reaches the log, whatever a client sends: requests whose
// headers fasthttp cannot parse (it logs its read buffer), clients that
// drop mid-headers, secrets in query strings, request ids and oversized
// headers. The server runs at debug level so that everything it could log
// is logged.
func TestNoSecretsInLogs(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: refArgs(0, "--log-level", "debug")})
	e := newEnv(t, srv, "pro")
	token := e.token(t, srv, map[string]any{})
	api := harness.APIPath
	auth := "X-API-Key: " + e.key + "\r\nAuthorization: Bearer " + token + "\r\n"
	pad := "X-Pad: " + strings.Repeat("p", 300) + "\r\n" // headers over fasthttp's 200-byte snippet
	cases := []struct {
		name string
		req  string
		drop bool
	}{
		{"bad content-length", "POST " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: abc\r\n\r\n", false},
		{"bad content-length, long headers", "POST " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + pad + auth + pad + "Content-Length: 1x\r\n\r\n", false},
		{"drop mid-headers", "GET " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + auth, true},
		{"drop mid-headers, long", "GET " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + pad + auth + pad, true},
		{"drop in the request line", "GET " + api + "/voices?api_key=" + e.key, true},
		{"bad header line", "GET " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + auth + "Broken\r\n\r\n", false},
		{"bad chunked body", "POST " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\nzz\r\n" + e.key + "\r\n", false},
		{"bad method", "G\x01T " + api + "/voices?api_key=" + e.key + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", false},
		{"headers too large", "GET " + api + "/voices HTTP/1.1\r\nHost: x\r\n" + auth + "X-Big: " + strings.Repeat("b", 20<<10) + "\r\n\r\n", false},
		{"secret as request id", "GET " + api + "/voices HTTP/1.1\r\nHost: x\r\nX-Request-Id: " + e.key + "\r\n" + auth + "Connection: close\r\n\r\n", false},
		{"secrets in the query", "GET " + api + "/stream?api_key=" + e.key + "&access_token=" + token + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false},
		{"unknown path", "GET /nowhere/" + e.key + " HTTP/1.1\r\nHost: x\r\n" + auth + "Connection: close\r\n\r\n", false},
	}
	for _, c := range cases {
		rawExchange(t, srv.Addr, c.req, c.drop)
	}
	// A request that logs after the exchanges above: once its line is in
	// the log, so are theirs (one connection at a time, in order).
	mustCall(t, "GET", srv.URL+"/healthz", nil)
	if !poll(10*time.Second, func() bool { return strings.Contains(srv.Logs(), `route="GET /healthz"`) }) {
		t.Fatalf("no access log line for /healthz:\n%s", srv.Logs())
	}
	logs := srv.Logs()
	secret := regexp.MustCompile(`(?i)vs[kt]_[A-Za-z0-9_-]{4,}`)
	for _, s := range []string{e.key, token, e.key[4:20], token[4:20]} {
		if strings.Contains(logs, s) {
			t.Errorf("a secret is in the log: %q", s[:8]+"...")
		}
	}
	for _, m := range secret.FindAllString(logs, 10) {
		t.Errorf("secret-shaped value in the log: %q", m)
	}
	if t.Failed() {
		t.Logf("log:\n%s", logs)
	}
	if !strings.Contains(logs, "fasthttp") {
		t.Errorf("fasthttp logged nothing: the cases no longer reach its logger")
	}
}
