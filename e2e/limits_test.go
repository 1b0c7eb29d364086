package e2e

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// longText keeps a paced (--reference-rtf 1) synthesis running for a while.
var longText = strings.Repeat("This sentence keeps the stream open for a while. ", 20)

// openStream starts an SSE stream and returns once its first line arrived
// (the slot is held) or the request was refused (the response is returned
// read). Cancel ends the stream.
func openStream(t testing.TB, srv *harness.Server, e *env) (status int, refused *resp, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.API+"/voices/"+e.voice+"/stream",
		strings.NewReader(`{"text":"`+longText+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", e.key)
	hr, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("stream: %v", err)
	}
	if hr.StatusCode != 200 {
		r := &resp{status: hr.StatusCode, header: hr.Header}
		r.body, _ = readAll(hr)
		cancel()
		return hr.StatusCode, r, func() {}
	}
	if _, err := bufio.NewReader(hr.Body).ReadString('\n'); err != nil {
		cancel()
		t.Fatalf("stream: no first event: %v", err)
	}
	return 200, nil, func() { cancel(); hr.Body.Close() }
}

func readAll(hr *http.Response) ([]byte, error) {
	defer hr.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := hr.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return []byte(b.String()), nil
		}
	}
}

// twoPG starts two servers on one fresh Postgres schema.
func twoPG(t *testing.T, rtf float64) (a, b *harness.Server) {
	t.Helper()
	dsn := pgDSN(t)
	a = harness.Start(t, harness.Options{DB: dsn, Args: refArgs(rtf)})
	b = harness.Start(t, harness.Options{DB: dsn, Args: refArgs(rtf)})
	return a, b
}

// TestConcurrencyAcrossServers: free plan (2 slots), two servers on one
// Postgres: the third concurrent stream is 429 concurrency_limited, and a
// slot freed on one server is usable on the other.
func TestConcurrencyAcrossServers(t *testing.T) {
	a, b := twoPG(t, 1)
	e := newEnv(t, a, "free", "--rps", "0") // only the slots decide here
	_, _, stop1 := openStream(t, a, e)
	_, _, stop2 := openStream(t, b, e)
	defer stop2()
	for _, srv := range []*harness.Server{a, b} {
		status, r, stop := openStream(t, srv, e)
		stop()
		if status != 429 || r.code() != "concurrency_limited" || r.header.Get("Retry-After") == "" {
			t.Fatalf("third stream: %d %s %v", status, r.body, r.header)
		}
		if rl := r.header.Get("RateLimit"); !strings.Contains(rl, `"concurrency";r=0`) {
			t.Errorf("RateLimit on refusal: %q", rl)
		}
	}
	stop1()
	if !poll(5*time.Second, func() bool {
		status, _, stop := openStream(t, b, e)
		stop()
		return status == 200
	}) {
		t.Fatal("a slot freed on server A never became usable on server B")
	}
}

// TestRateAcrossServers: free plan (2 requests per second), 10 requests at
// once spread over two servers: at most 2 are let through.
func TestRateAcrossServers(t *testing.T) {
	a, b := twoPG(t, 0)
	e := newEnv(t, a, "free")
	time.Sleep(1100 * time.Millisecond) // newEnv's own request leaves the window
	got, span := burst([]*harness.Server{a, b}, e, 10)
	if got["200"]+got["429 rate_limited"] != 10 || got["200"] < 1 {
		t.Fatalf("outcomes %v", got)
	}
	if span < time.Second && got["200"] > 2 {
		t.Fatalf("%d of 10 requests admitted within %v on a 2/s plan: %v", got["200"], span, got)
	}
	t.Logf("10 requests in %v: %v", span, got)
}

// TestSlotAfterKill: a server killed with -9 while holding both slots of a
// free workspace; the other server can use a slot again within 30 s.
func TestSlotAfterKill(t *testing.T) {
	a, b := twoPG(t, 1)
	e := newEnv(t, a, "free", "--rps", "0")
	_, _, stop1 := openStream(t, a, e)
	defer stop1()
	_, _, stop2 := openStream(t, a, e)
	defer stop2()
	if status, _, stop := openStream(t, b, e); status != 429 {
		stop()
		t.Fatalf("slots not held: %d", status)
	}
	a.Kill()
	killed := time.Now()
	if !poll(30*time.Second, func() bool {
		status, _, stop := openStream(t, b, e)
		stop()
		return status == 200
	}) {
		t.Fatal("the killed server's slots did not come back within 30 s")
	}
	t.Logf("slot usable again %v after kill -9", time.Since(killed).Round(100*time.Millisecond))
}
