package e2e

import (
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// TestClusterOutageServesLeases: three servers on one Postgres that goes
// away (docs: README, "Running several servers"). Each server serves from
// the share it holds, never past it (nor the workspace's limit in all),
// answers 503 store_unavailable beyond it, and once its leases' lifetime
// has passed (--lease-ttl 3s) answers 503 to everything; with the store
// back it serves again.
func TestClusterOutageServesLeases(t *testing.T) {
	pg := newPGCluster(t)
	var srvs []*harness.Server
	for range 3 {
		srvs = append(srvs, harness.Start(t, harness.Options{DB: pg.DSN(),
			Args: refArgs(1, "--lease-ttl", "3s", "--lease-sync", "200ms")}))
	}
	const limit = 100
	e := newEnv(t, srvs[0], "pro", "--concurrency", "100", "--rps", "0", "--billing", "off")
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	held := make([]int, len(srvs))
	for i, srv := range srvs {
		warmCaches(t, srv, e)
		for range 2 {
			status, r, stop := openStream(t, srv, e)
			stops = append(stops, stop)
			if status != 200 {
				t.Fatalf("stream before the outage: %d %s", status, r.body)
			}
		}
		if !poll(3*time.Second, func() bool {
			held[i] = leaseGauge(t, srv, "held")
			return held[i] > leaseGauge(t, srv, "in_use")
		}) {
			t.Fatalf("server %d: a share of %d with 2 in use, no headroom to serve an outage from", i, held[i])
		}
	}

	pg.stop()
	down := time.Now()
	total := 0
	for i, srv := range srvs {
		admitted := 0
		for {
			status, r, stop := openStream(t, srv, e)
			if status == 200 {
				admitted++
				stops = append(stops, stop)
				if 2+admitted > held[i] {
					t.Fatalf("server %d admitted %d streams with the store down, on a share of %d (2 in use)", i, admitted, held[i])
				}
				continue
			}
			if status != 503 || r.code() != "store_unavailable" || r.header.Get("Retry-After") != "1" {
				t.Fatalf("server %d past its share: %s, want 503 store_unavailable with Retry-After 1", i, r.outcome())
			}
			break
		}
		if since := time.Since(down); since < 2*time.Second && admitted == 0 {
			t.Errorf("server %d served nothing from its share of %d (2 in use) %v into the outage", i, held[i], since)
		}
		total += 2 + admitted
		t.Logf("server %d: share %d, %d more streams with the store down", i, held[i], admitted)
	}
	if total > limit {
		t.Fatalf("%d streams open across the servers for a limit of %d", total, limit)
	}

	// Past the leases' lifetime nothing is admitted anywhere.
	time.Sleep(time.Until(down.Add(3 * time.Second)))
	for i, srv := range srvs {
		status, r, stop := openStream(t, srv, e)
		stop()
		if status != 503 || r.code() != "store_unavailable" {
			t.Errorf("server %d after its leases' lifetime: %d, want 503 store_unavailable", i, status)
		}
	}

	pg.start()
	for i, srv := range srvs {
		if !poll(30*time.Second, func() bool {
			status, _, stop := openStream(t, srv, e)
			stop()
			return status == 200
		}) {
			t.Errorf("server %d never served again with the store back", i)
		}
	}
}

// warmCaches waits until srv serves e's key and voice from its caches
// (trusted once its change feed runs): a request that reads neither from
// the store. Until then every request asks the store for them.
func warmCaches(t *testing.T, srv *harness.Server, e *env) {
	t.Helper()
	calls := func() int {
		n := 0
		for _, m := range []string{"GetAPIKeyByHash", "GetVoice"} {
			n += int(metricSum(t, srv, "voicesvc_store_duration_seconds_count", `method="`+m+`"`))
		}
		return n
	}
	if !poll(5*time.Second, func() bool {
		before := calls()
		mustCall(t, "GET", srv.API+"/voices/"+e.voice, nil, keyHdr(e.key)...)
		return calls() == before
	}) {
		t.Fatalf("%s still reads the key or the voice from the store on every request", srv.Addr)
	}
}
