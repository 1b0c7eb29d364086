package sqlite_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"voicesvc/control"
)

// BenchmarkLimitsAndCharge is what limits and billing add to one synthesis
// request with the embedded store, called as the gateway calls them: the
// in-process rate check and slot, the meter's charge against SQLite, the
// release. The workspace has a request rate the benchmark never reaches, so
// every request takes the admitted path of every step.
func BenchmarkLimitsAndCharge(b *testing.B) {
	ctx := context.Background()
	db := MustOpenDB(b)
	rps, allowance := 1_000_000, int64(1)<<50
	ws := &control.Workspace{Plan: "pro", RPS: &rps, Allowance: &allowance}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		b.Fatal(err)
	}
	lim := control.NewMemoryLimiter()
	m := control.NewMeter(db, control.BillingEnforce)
	l := ws.Limits(control.BillingEnforce)
	lat := make([]time.Duration, 0, 1<<16)
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
