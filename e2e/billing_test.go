package e2e

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// usedOf is the workspace's used characters this month (admin prints the
// workspace for an update without changes).
func usedOf(t testing.TB, db, ws string) int64 {
	t.Helper()
	return int64(harness.Admin(t, db, "workspace", "update", "--id", ws)["used"].(float64))
}

// eventuallyUsed is the used characters once they reach want, or after 3
// seconds: servers settle what they synthesized at every lease sync.
func eventuallyUsed(t testing.TB, db, ws string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		used := usedOf(t, db, ws)
		if used == want || time.Now().After(deadline) {
			return used
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// settledUsed is the used characters once the servers have settled what
// they synthesized: the same in two reads a lease sync apart.
func settledUsed(t testing.TB, db, ws string) int64 {
	t.Helper()
	used := usedOf(t, db, ws)
	for range 10 {
		time.Sleep(700 * time.Millisecond) // more than --lease-sync (500 ms)
		now := usedOf(t, db, ws)
		if now == used {
			break
		}
		used = now
	}
	return used
}

func remainingOf(t testing.TB, r *resp) int64 {
	t.Helper()
	n, err := strconv.ParseInt(r.header.Get("X-Billing-Remaining"), 10, 64)
	if err != nil {
		t.Fatalf("X-Billing-Remaining %q on %d", r.header.Get("X-Billing-Remaining"), r.status)
	}
	return n
}

// TestBillingUnderConcurrency: 1,000 concurrent small speak requests with
// billing enforced and an allowance that covers about three quarters of
// them. The used characters equal the sum over the successful requests
// exactly (once the servers settled: usage counts characters as
// synthesized, within a lease sync) and never pass the allowance; every
// refusal is a flat 402. With one server (SQLite) X-Billing-Remaining,
// taken in order, falls by exactly each request's characters and nothing
// covered is refused. With two (Postgres) each server's header is the
// balance less the other's reservation (docs/api.md, "Running several
// servers"): never more than the balance.
func TestBillingUnderConcurrency(t *testing.T) {
	for _, c := range []struct {
		name    string
		dsn     func(testing.TB) string
		servers int
	}{{"sqlite", sqliteDSN, 1}, {"postgres-two-servers", pgDSN, 2}} {
		t.Run(c.name, func(t *testing.T) {
			dsn := c.dsn(t)
			var srvs []*harness.Server
			for i := 0; i < c.servers; i++ {
				srvs = append(srvs, harness.Start(t, harness.Options{DB: dsn, Args: refArgs(0, "--billing", "enforce")}))
			}
			const allowance = 3000
			e := newEnv(t, srvs[0], "pro", "--concurrency", "2000", "--rps", "0", "--allowance", fmt.Sprint(allowance))

			// Sequentially first: the header falls by exactly the characters.
			r1 := mustCall(t, "POST", e.speakURL(srvs[0]), `{"text":"héllo","output_format":"s16le"}`, keyHdr(e.key)...)
			r2 := mustCall(t, "POST", e.speakURL(srvs[len(srvs)-1]), `{"text":"ab","output_format":"s16le"}`, keyHdr(e.key)...)
			exact := c.servers == 1
			if r1.status != 200 || r2.status != 200 || remainingOf(t, r1) != allowance-5 ||
				exact && remainingOf(t, r2) != allowance-7 || remainingOf(t, r2) > allowance-7 {
				t.Fatalf("sequential: %d %d, remaining %s then %s", r1.status, r2.status,
					r1.header.Get("X-Billing-Remaining"), r2.header.Get("X-Billing-Remaining"))
			}

			type result struct {
				chars     int64
				status    int
				remaining int64
				body      string
			}
			results := make([]result, 1000)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range results {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					n := i%7 + 1 // 1-7 characters, 4 on average: 4,000 asked of 2,993 left
					text := strings.Repeat("é", n)
					<-start
					r := call("POST", e.speakURL(srvs[i%len(srvs)]), `{"text":"`+text+`","output_format":"s16le"}`, keyHdr(e.key)...)
					res := result{chars: int64(n)}
					if r != nil {
						res.status, res.body = r.status, string(r.body)
						if r.status == 200 {
							res.remaining, _ = strconv.ParseInt(r.header.Get("X-Billing-Remaining"), 10, 64)
						}
					}
					results[i] = res
				}(i)
			}
			close(start)
			wg.Wait()

			var ok []result
			var sum int64
			statuses := map[int]int{}
			for _, r := range results {
				statuses[r.status]++
				switch r.status {
				case 200:
					ok = append(ok, r)
					sum += r.chars
				case 402:
					var flat map[string]any
					if err := json.Unmarshal([]byte(r.body), &flat); err != nil {
						t.Fatalf("402 body: %s", r.body)
					}
					if s, isStr := flat["error"].(string); !isStr || s != "quota_exhausted" ||
						flat["unit"] != "character" || flat["limit"] != float64(allowance) || flat["status"] != nil {
						t.Fatalf("402 body not flat: %s", r.body)
					}
					if used, _ := flat["used"].(float64); exact && int64(used)+r.chars <= allowance {
						t.Fatalf("refused although covered: %d chars, used %v", r.chars, used)
					}
				default:
					t.Fatalf("status %d: %.300s", r.status, r.body)
				}
			}
			used := eventuallyUsed(t, dsn, e.ws, sum+7)
			if used != sum+7 || used > allowance {
				t.Fatalf("used %d, successful requests asked %d (+7 sequential), allowance %d: %v", used, sum, allowance, statuses)
			}
			if !exact {
				t.Logf("%v; used %d of %d", statuses, used, allowance)
				return
			}
			// Each success's balance is the one after its own charge, and
			// charges are serialized: in falling order each is the previous
			// minus its characters.
			sort.Slice(ok, func(i, j int) bool { return ok[i].remaining > ok[j].remaining })
			prev := int64(allowance - 7)
			for _, r := range ok {
				if r.remaining != prev-r.chars {
					t.Fatalf("X-Billing-Remaining %d after %d characters, previous %d", r.remaining, r.chars, prev)
				}
				prev = r.remaining
			}
			t.Logf("%v; used %d of %d", statuses, used, allowance)
		})
	}
}
