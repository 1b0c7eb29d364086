package gateway

import (
	"strings"
	"testing"
)

// The documentation is not to be framed (clickjacking) or sniffed, as the
// dashboard: X-Frame-Options DENY and a CSP with frame-ancestors 'none' on
// every page and on the OpenAPI document, the 404 included.
func TestDocsSecurityHeaders(t *testing.T) {
	ts := newTestServer(t, "")
	for _, path := range []string{"/docs/", "/docs/realtime.md", "/docs/api.md", "/openapi.yaml", "/docs/openapi.yaml", "/docs/nope.md"} {
		r := ts.do("GET", "!"+path, "", nil)
		if r.status != 200 && !(path == "/docs/nope.md" && r.status == 404) {
			t.Fatalf("%s: status %d", path, r.status)
		}
		if got := r.header.Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("%s: X-Frame-Options %q, want DENY", path, got)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") ||
			!strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
		if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options %q, want nosniff", path, got)
		}
	}
}
