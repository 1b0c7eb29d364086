package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/sqlite"
)

// BenchmarkAdmission measures what limits plus billing add to one synthesis
// request: AllowRequest (a plan with a request rate), Acquire of a stream
// slot, Meter.Charge in enforce mode, and the slot's Release, called
// directly against each store. Targets (issue 5): p50 ≤ 50 µs in-process
// (SQLite store, memory limiter) and ≤ 1 ms on Postgres over loopback.
// It reports p50 and p99 per request besides ns/op.
//
//	go test ./e2e -run '^$' -bench Admission -benchtime 2000x
func BenchmarkAdmission(b *testing.B) {
	b.Run("sqlite-memory", func(b *testing.B) {
		db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		benchAdmission(b, db, control.NewMemoryLimiter())
	})
	b.Run("postgres", func(b *testing.B) {
		db, err := postgres.Open(context.Background(), pgDSN(b))
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		lim := db.Limiter(control.NewID())
		defer lim.Close()
		benchAdmission(b, db, lim)
	})
}

func benchAdmission(b *testing.B, store control.Store, lim control.Limiter) {
	ctx := context.Background()
	const workspaces = 100
	allowance := int64(1) << 40
	wss := make([]*control.Workspace, workspaces)
	for i := range wss {
		w := &control.Workspace{Name: fmt.Sprint("bench", i), Plan: "pro", Allowance: &allowance}
		if err := store.CreateWorkspace(ctx, w); err != nil {
			b.Fatal(err)
		}
		wss[i] = w
	}
	meter := control.NewMeter(store, control.BillingEnforce)
	// Per request: the whole, and the limiter and meter parts apart.
	var lat, limLat, chargeLat []time.Duration
	one := func(w *control.Workspace, record bool) {
		t0 := time.Now()
		if _, err := lim.AllowRequest(ctx, w.ID, 1000); err != nil {
			b.Fatal(err)
		}
		lease, _, err := lim.Acquire(ctx, w.ID, control.SlotStream, 10)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, _, err := meter.Charge(ctx, w, 42); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		lease.Release()
		t3 := time.Now()
		if record {
			lat = append(lat, t3.Sub(t0))
			limLat = append(limLat, t1.Sub(t0)+t3.Sub(t2))
			chargeLat = append(chargeLat, t2.Sub(t1))
		}
	}
	for _, w := range wss { // warm up: rate logs, prepared statements
		one(w, false)
	}
	lat, limLat, chargeLat = make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		one(wss[i%workspaces], true)
	}
	b.StopTimer()
	b.ReportMetric(pct(lat, 50), "p50-µs")
	b.ReportMetric(pct(lat, 99), "p99-µs")
	b.ReportMetric(pct(limLat, 50), "limiter-p50-µs")
	b.ReportMetric(pct(chargeLat, 50), "charge-p50-µs")
}

// pct is the p-th percentile of d in microseconds.
func pct(d []time.Duration, p int) float64 {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return float64(d[len(d)*p/100].Nanoseconds()) / 1e3
}
