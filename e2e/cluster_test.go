package e2e

import (
	"bufio"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// The leases of docs/api.md, "Running several servers": several servers on
// one Postgres count limits and charge characters in memory, and still keep
// every workspace's limits and balance.

// pgServers starts n servers on one fresh Postgres schema with extra flags.
func pgServers(t *testing.T, n int, rtf float64, extra ...string) []*harness.Server {
	t.Helper()
	dsn := pgDSN(t)
	var srvs []*harness.Server
	for i := 0; i < n; i++ {
		srvs = append(srvs, harness.Start(t, harness.Options{DB: dsn, Args: refArgs(rtf, extra...)}))
	}
	return srvs
}

// leaseGauge is a server's voicesvc_lease_slots{kind="stream",state} value.
func leaseGauge(t testing.TB, srv *harness.Server, state string) int {
	t.Helper()
	r := mustCall(t, "GET", srv.URL+"/metrics", nil)
	prefix := `voicesvc_lease_slots{kind="stream",state="` + state + `"} `
	sc := bufio.NewScanner(strings.NewReader(string(r.body)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int(n)
		}
	}
	t.Fatalf("/metrics has no %q", prefix)
	return 0
}

// TestClusterFreeExact: a Free workspace (2 streams, 2 requests per second)
// on three servers: in every trial a stream is opened on each server at
// once, and never are three open together; and of requests sent at once to
// the three servers, at most the plan's 2 per second are let through.
func TestClusterFreeExact(t *testing.T) {
	srvs := pgServers(t, 3, 1)
	e := newEnv(t, srvs[0], "free", "--rps", "0", "--billing", "off")
	trials := 1000
	if testing.Short() {
		trials = 100
	}
	most := 0
	for trial := 0; trial < trials; trial++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		open := 0
		var stops []func()
		for _, srv := range srvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, r, stop := openStream(t, srv, e)
				mu.Lock()
				defer mu.Unlock()
				stops = append(stops, stop)
				switch {
				case status == 200:
					open++
				case status != 429 || r.code() != "concurrency_limited":
					t.Errorf("trial %d: %d %s", trial, status, r.body)
				}
			}()
		}
		wg.Wait()
		for _, stop := range stops {
			stop()
		}
		if open > 2 {
			t.Fatalf("trial %d: %d streams open at once on a 2-stream plan", trial, open)
		}
		most = max(most, open)
	}
	if most < 2 {
		t.Fatalf("never 2 streams at once in %d trials: the limit is stricter than the plan", trials)
	}

	harness.Admin(t, e.db, "workspace", "update", "--id", e.ws, "--rps", "2")
	time.Sleep(2100 * time.Millisecond) // the change reaches every server, the window empties
	if got, span := burst(srvs, e, 12); span < time.Second && got["200"] > 2 {
		t.Fatalf("%d of 12 requests admitted within %v on a 2/s plan: %v", got["200"], span, got)
	}
}

// burst sends n requests of e at once, spread over srvs in turn, and
// returns how many had each outcome and the time from the first sent to
// the last answered.
func burst(srvs []*harness.Server, e *env, n int) (map[string]int, time.Duration) {
	got := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		srv := srvs[i%len(srvs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r := call("GET", srv.API+"/voices/"+e.voice, nil, keyHdr(e.key)...)
			mu.Lock()
			got[r.outcome()]++
			mu.Unlock()
		}()
	}
	begin := time.Now()
	close(start)
	wg.Wait()
	return got, time.Since(begin)
}

// rpsHammer sends requests of e to every server from 9 clients for span
// and counts those admitted within it (sent and answered within it) and
// those refused, checking each refusal's Retry-After and RateLimit.
func rpsHammer(t *testing.T, srvs []*harness.Server, e *env, span time.Duration) (admitted, refused int) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	begin := time.Now()
	end := begin.Add(span)
	for i := 0; i < 9; i++ {
		srv := srvs[i%3]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				r := call("GET", srv.API+"/voices/"+e.voice, nil, keyHdr(e.key)...)
				done := time.Now()
				mu.Lock()
				switch {
				case r.status == 200 && !done.After(end):
					admitted++ // sent and answered within the span: admitted within it
				case r.status == 200:
				case r.status == 429 && r.code() == "rate_limited":
					refused++
					if ra := r.header.Get("Retry-After"); ra == "" || ra == "0" {
						t.Errorf("429 rate_limited with Retry-After %q", ra)
					}
					if rl := r.header.Get("RateLimit"); !strings.HasPrefix(rl, `"rps";r=0;t=`) || strings.HasPrefix(rl, `"rps";r=0;t=0`) {
						t.Errorf("429 rate_limited with RateLimit %q", rl)
					}
				default:
					t.Errorf("%s: %d %s", srv.Addr, r.status, r.body)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return admitted, refused
}

// TestClusterRPSShares: a workspace with rps 10 on three servers that
// lease it (--lease-exact-below 4): clients hammering all three for 2
// seconds get at most 10*2 plus the shares the servers can hold (3 servers,
// 1 request each: min(--lease-requests, rps/8) = 1) admitted within those
// 2 seconds, at least the limit, and refusals answer 429 rate_limited with
// Retry-After and the RateLimit item. A Free workspace (2 rps, below 4) on
// the same servers stays exact.
func TestClusterRPSShares(t *testing.T) {
	srvs := pgServers(t, 3, 1, "--lease-exact-below", "4")
	e := newEnv(t, srvs[0], "pro", "--rps", "10", "--billing", "off")
	time.Sleep(1100 * time.Millisecond) // newEnv's request leaves the window
	const rps, shares = 10, 3 * 1
	const span = 2 * time.Second
	admitted, refused := rpsHammer(t, srvs, e, span)
	t.Logf("rps %d on 3 servers over %v: %d admitted, %d refused", rps, span, admitted, refused)
	if admitted > rps*2+shares {
		t.Fatalf("%d admitted within %v on rps %d: more than %d (the limit plus the shares)", admitted, span, rps, rps*2+shares)
	}
	if admitted < rps || refused == 0 {
		t.Fatalf("%d admitted and %d refused within %v on rps %d", admitted, refused, span, rps)
	}
	// Refusals come from memory once the store said the window is full:
	// far fewer store calls than requests.
	calls := 0.0
	for _, srv := range srvs {
		calls += metricSum(t, srv, "voicesvc_store_duration_seconds_count", `method="LeaseRequests"`)
	}
	t.Logf("%v LeaseRequests store calls across the servers", calls)
	if calls == 0 || calls > float64(admitted+refused)/10 {
		t.Fatalf("%v LeaseRequests store calls for %d requests", calls, admitted+refused)
	}

	free := newEnv(t, srvs[1], "free", "--billing", "off")
	time.Sleep(1100 * time.Millisecond)
	if got, d := burst(srvs, free, 12); d < time.Second && got["200"] > 2 {
		t.Fatalf("Free: %d of 12 admitted within %v on 2 rps: %v", got["200"], d, got)
	}

	// The limit lowered by admin to 4 (still leased, a share of 1): within
	// 2 seconds every server counts the new limit.
	harness.Admin(t, e.db, "workspace", "update", "--id", e.ws, "--rps", "4")
	time.Sleep(2 * time.Second)
	admitted, _ = rpsHammer(t, srvs, e, time.Second)
	t.Logf("after rps went down to 4: %d admitted within 1 s", admitted)
	if admitted > 4+shares {
		t.Fatalf("%d admitted within 1 s, 2 s after rps went down to 4 (bound %d)", admitted, 4+shares)
	}
}

// TestClusterAdminChangeShrinks: servers holding shares with headroom of a
// 100-stream workspace; the limit lowered to 5 by admin: within 2 seconds
// every server refuses a new stream and holds no slot beyond those in use.
func TestClusterAdminChangeShrinks(t *testing.T) {
	srvs := pgServers(t, 2, 1)
	e := newEnv(t, srvs[0], "pro", "--concurrency", "100", "--rps", "0", "--billing", "off")
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	for _, srv := range srvs {
		for i := 0; i < 4; i++ {
			status, r, stop := openStream(t, srv, e)
			stops = append(stops, stop)
			if status != 200 {
				t.Fatalf("stream %d: %d %s", i, status, r.body)
			}
		}
		// The share grows past what is in use by the server's next lease
		// call (a batch), not necessarily by the fourth stream's.
		var held, used int
		if !poll(2*time.Second, func() bool {
			held, used = leaseGauge(t, srv, "held"), leaseGauge(t, srv, "in_use")
			return held > used
		}) {
			t.Fatalf("a share of %d for %d in use: no headroom to shrink", held, used)
		}
	}
	harness.Admin(t, e.db, "workspace", "update", "--id", e.ws, "--concurrency", "5")
	changed := time.Now()
	for _, srv := range srvs {
		if !poll(time.Until(changed.Add(2*time.Second)), func() bool {
			status, _, stop := openStream(t, srv, e)
			stop()
			return status == 429 && leaseGauge(t, srv, "held") <= leaseGauge(t, srv, "in_use")
		}) {
			t.Fatalf("%s: 2 s after the limit went to 5 (8 streams open) it still admits or holds %d slots for %d in use",
				srv.Addr, leaseGauge(t, srv, "held"), leaseGauge(t, srv, "in_use"))
		}
	}
}

// TestClusterCreditsExact: 200 concurrent speaks on three servers against a
// balance of 500 credits: the balance never goes below zero, and once the
// servers settled it is charged exactly the characters of the speaks that
// succeeded.
func TestClusterCreditsExact(t *testing.T) {
	srvs := pgServers(t, 3, 0, "--billing", "enforce")
	e := newEnv(t, srvs[0], "free", "--rps", "0", "--concurrency", "1000", "--allowance", "0", "--credits", "500")
	var mu sync.Mutex
	var sum int64
	statuses := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			n := i%7 + 1
			<-start
			r := call("POST", e.speakURL(srvs[i%3]), `{"text":"`+strings.Repeat("é", n)+`","output_format":"s16le"}`, keyHdr(e.key)...)
			mu.Lock()
			defer mu.Unlock()
			statuses[r.status]++
			switch r.status {
			case 200:
				sum += int64(n)
				if rem := remainingOf(t, r); rem < 0 || rem > 500 {
					t.Errorf("X-Billing-Remaining %d", rem)
				}
			case 402:
			default:
				t.Errorf("status %d: %s", r.status, r.body)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	credits := func() int64 {
		return int64(harness.Admin(t, e.db, "workspace", "update", "--id", e.ws)["credits"].(float64))
	}
	var left int64
	poll(3*time.Second, func() bool { left = credits(); return 500-left == sum })
	if left < 0 || 500-left != sum {
		t.Fatalf("credits left %d: charged %d, speaks that succeeded asked %d: %v", left, 500-left, sum, statuses)
	}
	if statuses[402] == 0 {
		t.Fatalf("no refusal for about 800 characters asked of 500: %v", statuses)
	}
	t.Logf("%v; %d of 500 credits charged", statuses, sum)
}

// TestClusterKillReturnsLeases: a server killed with -9 while holding a
// share; the other server gets the whole limit back within the leases'
// lifetime (--lease-ttl 2s).
func TestClusterKillReturnsLeases(t *testing.T) {
	srvs := pgServers(t, 2, 1, "--lease-ttl", "2s", "--lease-sync", "200ms")
	a, b := srvs[0], srvs[1]
	e := newEnv(t, a, "pro", "--concurrency", "20", "--rps", "0", "--billing", "off")
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	for i := 0; i < 10; i++ {
		if status, r, stop := openStream(t, a, e); status != 200 {
			t.Fatalf("stream on A: %d %s", status, r.body)
		} else {
			stops = append(stops, stop)
		}
	}
	a.Kill()
	killed := time.Now()
	open := 0
	if !poll(6*time.Second, func() bool {
		for open < 20 {
			status, _, stop := openStream(t, b, e)
			if status != 200 {
				stop()
				return false
			}
			stops = append(stops, stop)
			open++
		}
		return true
	}) {
		t.Fatalf("%d of 20 streams on B 6 s after A, holding a share of 2 s leases, was killed", open)
	}
	t.Logf("all 20 slots on B %v after kill -9", time.Since(killed).Round(100*time.Millisecond))
}

// TestClusterMetricsShowLeases: /metrics shows the leases a server holds.
func TestClusterMetricsShowLeases(t *testing.T) {
	srvs := pgServers(t, 1, 1)
	e := newEnv(t, srvs[0], "pro", "--rps", "0")
	_, _, stop := openStream(t, srvs[0], e)
	defer stop()
	r := mustCall(t, "GET", srvs[0].URL+"/metrics", nil)
	for _, name := range []string{"voicesvc_lease_slots", "voicesvc_lease_reserved_characters",
		"voicesvc_lease_unsettled_characters", "voicesvc_lease_requests", "voicesvc_lease_workspaces", "voicesvc_lease_syncs_total"} {
		if !hasSeries(string(r.body), name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	if n := leaseGauge(t, srvs[0], "in_use"); n != 1 {
		t.Errorf("in use %d with one stream open", n)
	}
}
