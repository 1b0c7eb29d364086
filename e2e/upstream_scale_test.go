package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// TestUpstreamScaleOut: 2 gateways on one Postgres in front of 3 voicesvc
// replicas (their own shared Postgres, so A's key is valid on each). Under
// steady load one replica is killed: every request whose audio had not
// started succeeds (a sentence that fails before audio is retried on
// another replica), /readyz shows the replica ejected within 5 s, and up
// again after it restarts. It reports requests, retries and failures.
//
// The replicas' own engines refuse work at capacity (503 upstream_busy,
// docs/api.md "When the engine is at capacity"); on a loaded machine the
// two left carry the third's share and may, and three such answers in a
// row eject a replica like any 5xx (docs/api.md "Readiness"), so that
// for a few seconds a gateway can have none up. Such a refusal reaches
// the client as 503 upstream_busy with Retry-After, and the clients here
// do what docs/api.md "Retrying" tells clients: they send the request
// again after Retry-After. What the kill itself costs (a refused or cut
// connection before audio) is retried by the gateway and never reaches a
// client: an upstream_busy is allowed only when a replica did refuse work
// at capacity.
func TestUpstreamScaleOut(t *testing.T) {
	bDSN, aDSN := pgDSN(t), pgDSN(t)
	var bs []*harness.Server
	for range 3 {
		bs = append(bs, harness.Start(t, harness.Options{DB: bDSN, Args: []string{"--engine-workers", "0"}}))
	}
	_, keyB := harness.Workspace(t, bDSN, "enterprise")
	voiceB := synVoices(t, bs[0], keyB)["en"]
	var urls []string
	for _, b := range bs {
		urls = append(urls, b.API+"/compat")
	}
	cfg := fmt.Sprintf(`engines:
  - name: b
    type: openai
    urls: [%s]
    api_key: %s
    model: service-v1
    timeout: 5s
    voices:
      - {alias: b-en, voice: %s, language: en-US}
`, strings.Join(urls, ", "), keyB, voiceB)
	path := filepath.Join(t.TempDir(), "voicesvc.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var as []*harness.Server
	for range 2 {
		as = append(as, harness.Start(t, harness.Options{DB: aDSN, Args: refArgs(0, "--config", path)}))
	}
	_, key := harness.Workspace(t, aDSN, "enterprise")
	voice := voiceByAlias(t, as[0], key, "b-en")

	// Steady load: 3 clients per gateway, each speaking two sentences at a
	// time, streamed raw, until stop.
	load := &scaleLoad{key: key, stop: make(chan struct{}),
		hc: &http.Client{Timeout: 30 * time.Second}}
	for _, a := range as {
		for range 3 {
			load.wg.Add(1)
			go load.client(a.API + "/voices/" + voice + "/speak")
		}
	}
	defer load.end()

	replicaState := func(a *harness.Server, url string) string {
		r := call("GET", a.URL+"/readyz", nil)
		if r != nil && r.status == 503 && r.code() == "unavailable" && strings.Contains(string(r.body), "no replica is up") {
			// No replica up (the others ejected for answers at capacity):
			// this one is ejected too (docs/api.md "Readiness").
			return "ejected"
		}
		if r == nil || r.status != 200 {
			return "unready"
		}
		var doc struct {
			Data struct {
				Engines []struct {
					Replicas []struct{ URL, State string }
				}
			}
		}
		json.Unmarshal(r.body, &doc)
		for _, e := range doc.Data.Engines {
			for _, rep := range e.Replicas {
				if rep.URL == url {
					return rep.State
				}
			}
		}
		return "missing"
	}

	time.Sleep(1500 * time.Millisecond)
	victim := bs[2]
	addr := victim.Addr
	victim.Kill()
	killed := time.Now()
	for _, a := range as {
		if !poll(5*time.Second-time.Since(killed), func() bool { return replicaState(a, urls[2]) == "ejected" }) {
			t.Fatalf("gateway %s: replica %s not ejected within 5 s of the kill", a.Addr, urls[2])
		}
	}
	t.Logf("replica ejected on both gateways %v after the kill", time.Since(killed).Round(time.Millisecond))
	time.Sleep(time.Second)
	restarted := harness.Start(t, harness.Options{DB: bDSN, Args: []string{"--engine-workers", "0", "--addr", addr}})
	if restarted.Addr != addr {
		t.Fatalf("restarted on %s, not %s", restarted.Addr, addr)
	}
	back := time.Now()
	for _, a := range as {
		if !poll(15*time.Second, func() bool { return replicaState(a, urls[2]) == "up" }) {
			t.Fatalf("gateway %s: replica %s not back after its restart", a.Addr, urls[2])
		}
	}
	t.Logf("replica up again %v after its restart", time.Since(back).Round(time.Millisecond))
	time.Sleep(time.Second) // load on the restored set
	load.end()

	retries, ufail := 0.0, 0.0
	for _, a := range as {
		retries += metricSum(t, a, "voicesvc_upstream_retries_total")
		ufail += metricSum(t, a, "voicesvc_upstream_failures_total")
	}
	// What the replicas refused at capacity (the killed one's count went
	// with it; its refusals were retried on the others).
	atCapacity := 0.0
	for _, b := range []*harness.Server{bs[0], bs[1], restarted} {
		atCapacity += metricSum(t, b, "voicesvc_engine_requests_total", `result="refused"`) +
			metricSum(t, b, "voicesvc_engine_requests_total", `result="rejected"`)
	}
	t.Logf("requests %d, failed %d, cut after audio %d, refused upstream_busy %d (sent again after Retry-After); "+
		"upstream retries %.0f, upstream failures %.0f, replica refusals at capacity %.0f",
		load.requests.Load(), load.failures.Load(), load.cut.Load(), load.busy.Load(), retries, ufail, atCapacity)
	if load.failures.Load() != 0 {
		t.Fatalf("%d requests failed before audio: %v", load.failures.Load(), load.failed[:min(len(load.failed), 5)])
	}
	if load.busy.Load() > 0 && atCapacity == 0 {
		t.Fatalf("%d requests refused upstream_busy while no replica refused work at capacity: the kill reached clients",
			load.busy.Load())
	}
	if retries == 0 || load.requests.Load() < 20 {
		t.Fatalf("the kill was not exercised: %d requests, %.0f retries", load.requests.Load(), retries)
	}
}

// scaleLoad is TestUpstreamScaleOut's clients: each sends one speak after
// another until stop, a refused one again after its Retry-After.
type scaleLoad struct {
	key  string
	hc   *http.Client
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	requests, failures, cut, busy atomic.Int64
	mu                            sync.Mutex
	failed                        []string
}

const scaleBody = `{"text":"The load goes on. Each request speaks two sentences.","output_format":"s16le"}`

func (l *scaleLoad) client(url string) {
	defer l.wg.Done()
	for {
		select {
		case <-l.stop:
			return
		default:
		}
		l.requests.Add(1)
		for !l.speak(url) { // refused at capacity: again after Retry-After
		}
	}
}

// speak sends the request once; false when it was refused upstream_busy
// and its Retry-After has passed, so that it goes again.
func (l *scaleLoad) speak(url string) bool {
	req, _ := http.NewRequest("POST", url, strings.NewReader(scaleBody))
	req.Header.Set("X-API-Key", l.key)
	req.Header.Set("Content-Type", "application/json")
	hr, err := l.hc.Do(req)
	if err != nil {
		l.fail(err.Error())
		return true
	}
	b, err := io.ReadAll(hr.Body)
	hr.Body.Close()
	r := &resp{status: hr.StatusCode, header: hr.Header, body: b}
	switch {
	case r.status == 503 && r.code() == "upstream_busy":
		ra, _ := strconv.Atoi(r.header.Get("Retry-After"))
		if ra < 1 {
			l.fail(fmt.Sprintf("upstream_busy with Retry-After %q", r.header.Get("Retry-After")))
			return true
		}
		l.busy.Add(1)
		select {
		case <-l.stop:
			return true // refused to the end: no failure of the kill
		case <-time.After(time.Duration(ra) * time.Second):
			return false
		}
	case r.status != 200:
		l.fail(fmt.Sprintf("%d %.200s", r.status, b))
	case err != nil || len(b) == 0:
		l.cut.Add(1) // its audio had started: a cut body is the contract
	}
	return true
}

func (l *scaleLoad) fail(what string) {
	l.failures.Add(1)
	l.mu.Lock()
	l.failed = append(l.failed, what)
	l.mu.Unlock()
}

// end stops the clients and waits for them; it may be called again.
func (l *scaleLoad) end() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// metricSum adds every series of a counter on srv's /metrics, or those
// whose line holds each of labels (`result="refused"`).
func metricSum(t testing.TB, srv *harness.Server, name string, labels ...string) float64 {
	t.Helper()
	r := mustCall(t, "GET", srv.URL+"/metrics", nil)
	sum := 0.0
	for _, line := range strings.Split(string(r.body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		held := true
		for _, l := range labels {
			held = held && strings.Contains(line, l)
		}
		if held {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
