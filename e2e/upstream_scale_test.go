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
	var requests, failures, cut atomic.Int64
	var mu sync.Mutex
	var failed []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: 30 * time.Second}
	body := `{"text":"The load goes on. Each request speaks two sentences.","output_format":"s16le"}`
	for _, a := range as {
		for range 3 {
			wg.Add(1)
			go func(url string) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					requests.Add(1)
					req, _ := http.NewRequest("POST", url, strings.NewReader(body))
					req.Header.Set("X-API-Key", key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := hc.Do(req)
					if err != nil {
						failures.Add(1)
						mu.Lock()
						failed = append(failed, err.Error())
						mu.Unlock()
						continue
					}
					b, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					switch {
					case resp.StatusCode != 200:
						failures.Add(1)
						mu.Lock()
						failed = append(failed, fmt.Sprintf("%d %.200s", resp.StatusCode, b))
						mu.Unlock()
					case err != nil || len(b) == 0:
						cut.Add(1) // its audio had started: a cut body is the contract
					}
				}
			}(a.API + "/voices/" + voice + "/speak")
		}
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()

	replicaState := func(a *harness.Server, url string) string {
		r := call("GET", a.URL+"/readyz", nil)
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
	close(stop)
	wg.Wait()

	retries, ufail := 0.0, 0.0
	for _, a := range as {
		retries += metricSum(t, a, "voicesvc_upstream_retries_total")
		ufail += metricSum(t, a, "voicesvc_upstream_failures_total")
	}
	t.Logf("requests %d, failed %d, cut after audio %d; upstream retries %.0f, upstream failures %.0f",
		requests.Load(), failures.Load(), cut.Load(), retries, ufail)
	if failures.Load() != 0 {
		t.Fatalf("%d requests failed before audio: %v", failures.Load(), failed[:min(len(failed), 5)])
	}
	if retries == 0 || requests.Load() < 20 {
		t.Fatalf("the kill was not exercised: %d requests, %.0f retries", requests.Load(), retries)
	}
}

// metricSum adds every series of a counter on srv's /metrics.
func metricSum(t testing.TB, srv *harness.Server, name string) float64 {
	t.Helper()
	r := mustCall(t, "GET", srv.URL+"/metrics", nil)
	sum := 0.0
	for _, line := range strings.Split(string(r.body), "\n") {
		if strings.HasPrefix(line, name+"{") || strings.HasPrefix(line, name+" ") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}
