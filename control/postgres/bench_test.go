package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"voicesvc/control"
)

// BenchmarkLimitsAndCharge is what limits and billing add to one synthesis
// request on the shared store, called as the gateway calls them: the rate
// check and the slot of the Postgres limiter, the meter's charge, the
// release. The workspace has a request rate the benchmark never reaches, so
// every request takes the admitted path of every step.
func BenchmarkLimitsAndCharge(b *testing.B) {
	ctx := context.Background()
	db := MustOpenDB(b, MustSchemaDSN(b))
	lim := db.Limiter("bench")
	defer lim.Close()
	rps, allowance := 1_000_000, int64(1)<<50
	ws := &control.Workspace{Plan: "pro", RPS: &rps, Allowance: &allowance}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		b.Fatal(err)
	}
	m := control.NewMeter(db, control.BillingEnforce)
	l := ws.Limits(control.BillingEnforce)
	// The round trip of an empty query, measured alongside: on a loaded
	// machine it dominates, and the request path makes three.
	rtt := make([]time.Duration, 0, 200)
	for range 200 {
		start := time.Now()
		if err := db.Ping(ctx); err != nil {
			b.Fatal(err)
		}
		rtt = append(rtt, time.Since(start))
	}
	slices.Sort(rtt)
	lat := make([]time.Duration, 0, 1<<14)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		// A deadline per request, as the gateway sets one (drivers do
		// more work for a context that can end).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if d, err := lim.AllowRequest(ctx, ws.ID, l.RPS); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
		lease, _, err := lim.Acquire(ctx, ws.ID, control.SlotStream, l.Concurrency)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := m.Charge(ctx, ws, 10); err != nil {
			b.Fatal(err)
		}
		lease.Release()
		cancel()
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
	// Reported after the loop: b.Loop's timer reset deletes earlier metrics.
	b.ReportMetric(float64(rtt[len(rtt)/2].Nanoseconds())/1e3, "rtt-p50-µs")
}

// reportPercentiles reports the p50 and p99 of per-request latencies, which
// ns/op (a mean) hides.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	b.ReportMetric(us(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(us(lat[len(lat)*99/100]), "p99-µs")
}
