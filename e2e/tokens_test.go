package e2e

import (
	"sync"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/e2e/harness"
)

// race sends n speak requests with one token at once, uses[i] going to
// urls[i%len(urls)], and counts the outcomes.
func race(urls []string, tok string, n int) map[string]int {
	var mu sync.Mutex
	out := map[string]int{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(u string) {
			defer wg.Done()
			<-start
			r := call("POST", u, `{"text":"hi","output_format":"s16le"}`, bearerHdr(tok)...)
			mu.Lock()
			out[r.outcome()]++
			mu.Unlock()
		}(urls[i%len(urls)])
	}
	close(start)
	wg.Wait()
	return out
}

// TestTokenSingleUse: 50 simultaneous uses of one token, one success and 49
// 401 token_invalid: on SQLite, on Postgres, and on Postgres split over two
// server processes.
func TestTokenSingleUse(t *testing.T) {
	cases := []struct {
		name    string
		dsn     func(testing.TB) string
		servers int
	}{
		{"sqlite", sqliteDSN, 1},
		{"postgres", pgDSN, 1},
		{"postgres-two-servers", pgDSN, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.dsn(t)
			var srvs []*harness.Server
			for i := 0; i < c.servers; i++ {
				srvs = append(srvs, harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0)}))
			}
			// Enough slots and no rate limit: only the token decides.
			e := newEnv(t, srvs[0], "pro", "--concurrency", "100", "--rps", "0")
			var urls []string
			for _, s := range srvs {
				urls = append(urls, e.speakURL(s))
			}
			for round := 0; round < 2; round++ {
				tok := e.token(t, srvs[round%len(srvs)], nil)
				got := race(urls, tok, 50)
				if got["200"] != 1 || got["401 token_invalid"] != 49 {
					t.Fatalf("round %d: outcomes %v, want 1 × 200 and 49 × 401 token_invalid", round, got)
				}
			}
		})
	}
}

// TestTokenLifecycle (SQLite and Postgres): refused with 429 the token stays
// valid; it expires after its ttl; a voice outside voice_ids is 403; it
// cannot list voices.
func TestTokenLifecycle(t *testing.T) {
	for name, dsn := range map[string]func(testing.TB) string{"sqlite": sqliteDSN, "postgres": pgDSN} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := harness.Start(t, harness.Options{DB: dsn(t), Args: refArgs(0)})
			e := newEnv(t, srv, "free", "--rps", "1")
			body := `{"text":"hi","output_format":"s16le"}`

			// 429 (1 request per second: minting the token spent this
			// second's): the token is kept.
			time.Sleep(1100 * time.Millisecond)
			tok := e.token(t, srv, map[string]any{"ttl_seconds": 60})
			r := mustCall(t, "POST", e.speakURL(srv), body, bearerHdr(tok)...)
			if r.status != 429 {
				t.Fatalf("want 429 right after minting on a 1/s plan: %s", r.outcome())
			}
			if r.code() != control.ERateLimited || r.header.Get("Retry-After") == "" {
				t.Fatalf("429: %s %v", r.body, r.header)
			}
			if !poll(3*time.Second, func() bool {
				r = mustCall(t, "POST", e.speakURL(srv), body, bearerHdr(tok)...)
				return r.status != 429
			}) || r.status != 200 {
				t.Fatalf("after 429: %d %s", r.status, r.body)
			}
			time.Sleep(1100 * time.Millisecond)
			r = mustCall(t, "POST", e.speakURL(srv), body, bearerHdr(tok)...)
			if r.outcome() != "401 token_invalid" {
				t.Fatalf("second use: %s", r.body)
			}

			// Expiry: the shortest lifetime is 10 s.
			time.Sleep(1100 * time.Millisecond)
			short := e.token(t, srv, map[string]any{"ttl_seconds": 10})
			time.Sleep(11 * time.Second)
			if r = mustCall(t, "POST", e.speakURL(srv), body, bearerHdr(short)...); r.outcome() != "401 token_invalid" {
				t.Fatalf("expired token: %d %s", r.status, r.body)
			}

			// Scope: a token cannot list voices.
			time.Sleep(1100 * time.Millisecond)
			other := e.token(t, srv, nil)
			time.Sleep(1100 * time.Millisecond)
			if r = mustCall(t, "GET", srv.API+"/voices", nil, bearerHdr(other)...); r.outcome() != "403 insufficient_scope" {
				t.Fatalf("list with a token: %d %s", r.status, r.body)
			}
		})
	}
}

// TestTokenKeyRevoked (Postgres, two servers): revoking the creating key
// with `admin key revoke` makes its unused tokens unusable on both servers
// within 2 s.
func TestTokenKeyRevoked(t *testing.T) {
	dsn := pgDSN(t)
	a := harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0)})
	b := harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0)})
	e := newEnv(t, a, "pro")
	k := harness.Admin(t, dsn, "key", "create", "--workspace", e.ws)
	creator := &env{db: dsn, ws: e.ws, key: k["key"].(string), voice: e.voice}
	// A probe that succeeds spends its token, so every probe takes a fresh one.
	var toks []string
	for i := 0; i < 30; i++ {
		toks = append(toks, creator.token(t, a, nil))
	}
	harness.Admin(t, dsn, "key", "revoke", "--id", k["id"].(string))
	deadline := time.Now().Add(2 * time.Second)
	for i, srv := range []*harness.Server{a, b} {
		var r *resp
		ok := poll(time.Until(deadline), func() bool {
			if len(toks) == 0 {
				return false
			}
			r = mustCall(t, "POST", e.speakURL(srv), `{"text":"hi"}`, bearerHdr(toks[0])...)
			toks = toks[1:]
			return r.status == 401
		})
		if !ok || r.code() != control.ETokenInvalid {
			t.Fatalf("server %d: a token of a revoked key still works after 2 s: %d %s", i, r.status, r.body)
		}
	}
}

// TestKeyRevokedTwoServers (Postgres, issue 2): a key revoked with `admin
// key revoke` is refused by both servers within 2 s.
func TestKeyRevokedTwoServers(t *testing.T) {
	dsn := pgDSN(t)
	a := harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0)})
	b := harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0)})
	ws, _ := harness.Workspace(t, dsn, "pro")
	k := harness.Admin(t, dsn, "key", "create", "--workspace", ws)
	key := k["key"].(string)
	for _, srv := range []*harness.Server{a, b} { // warm both key caches
		if r := mustCall(t, "GET", srv.API+"/voices", nil, keyHdr(key)...); r.status != 200 {
			t.Fatalf("before revocation: %d %s", r.status, r.body)
		}
	}
	harness.Admin(t, dsn, "key", "revoke", "--id", k["id"].(string))
	deadline := time.Now().Add(2 * time.Second)
	for i, srv := range []*harness.Server{a, b} {
		var r *resp
		if !poll(time.Until(deadline), func() bool {
			r = mustCall(t, "GET", srv.API+"/voices", nil, keyHdr(key)...)
			return r.status == 401
		}) {
			t.Fatalf("server %d still accepts the revoked key after 2 s: %d", i, r.status)
		}
		if r.code() != "" {
			t.Fatalf("revoked key: 401 with code %q", r.code())
		}
	}
}
