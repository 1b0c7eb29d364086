package e2e

import (
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// The store unreachable: every route answers 503 store_unavailable with
// Retry-After 1 (never 500), /readyz says so, and service comes back by
// itself with the store. The server runs on a Postgres cluster of its own,
// stopped and started mid-test.
func TestStoreOutage(t *testing.T) {
	pg := newPGCluster(t)
	srv := harness.Start(t, harness.Options{DB: pg.DSN(), Args: refArgs(0)})
	e := newEnv(t, srv, "pro")
	_, unseen := harness.Workspace(t, srv.DB, "pro") // a key this server never cached
	speak := map[string]any{"text": "Hello there.", "output_format": "wav"}
	if r := synPost(t, e.speakURL(srv), e.key, speak); r.status != 200 {
		t.Fatalf("speak before the outage: %d %s", r.status, r.body)
	}

	pg.stop()
	checks := []struct {
		name string
		do   func() *resp
	}{
		{"readyz", func() *resp { return call("GET", srv.URL+"/readyz", nil) }},
		{"list voices", func() *resp { return call("GET", srv.API+"/voices", nil, keyHdr(e.key)...) }},
		{"speak", func() *resp { return call("POST", e.speakURL(srv), speak, keyHdr(e.key)...) }},
		{"create voice", func() *resp {
			return call("POST", srv.API+"/voices", map[string]any{"name": "x", "consent": true}, keyHdr(e.key)...)
		}},
		{"uncached key", func() *resp { return call("GET", srv.API+"/voices", nil, keyHdr(unseen)...) }},
	}
	for _, c := range checks {
		r := c.do()
		if r == nil || r.status != 503 || r.code() != "store_unavailable" || r.header.Get("Retry-After") != "1" {
			var got string
			if r != nil {
				got = r.outcome() + " Retry-After=" + r.header.Get("Retry-After") + " " + string(r.body)
			}
			t.Errorf("%s with the store down: %s, want 503 store_unavailable with Retry-After 1", c.name, got)
		}
	}

	pg.start()
	for _, c := range checks {
		var last *resp
		if !poll(30*time.Second, func() bool {
			last = c.do()
			return last != nil && last.status < 300
		}) {
			t.Errorf("%s never recovered with the store back: %s", c.name, last.outcome())
		}
	}
}
