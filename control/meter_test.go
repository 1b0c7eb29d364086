package control_test

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/control/sqlite"
)

// The meter against the real SQLite store: the rules of docs/api.md
// "Plans" end to end, not against a fake that could agree with a mistake.

var pinned = time.Date(2026, 11, 30, 23, 59, 0, 0, time.UTC)

func openStore(tb testing.TB) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(tb.TempDir(), "meter.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func newWorkspace(tb testing.TB, db *sqlite.DB, w *control.Workspace) *control.Workspace {
	tb.Helper()
	if err := db.CreateWorkspace(context.Background(), w); err != nil {
		tb.Fatal(err)
	}
	return w
}

func newTestMeter(db *sqlite.DB, mode string) *control.StoreMeter {
	m := control.NewMeter(db, mode)
	control.SetMeterClock(m, func() time.Time { return pinned })
	return m
}

func TestMeterModes(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	allowance := int64(1000)
	type step struct {
		chars     int64
		code      string // "" = charged
		remaining int64
	}
	tests := []struct {
		name   string
		def    string
		ws     control.Workspace
		steps  []step
		used   int64 // at the end, from the store
		credit int64
	}{
		{"off", control.BillingOff, control.Workspace{Allowance: &allowance},
			[]step{{5000, "", -1}, {5000, "", -1}}, 0, 0},
		{"empty default is off", "", control.Workspace{Allowance: &allowance},
			[]step{{5000, "", -1}}, 0, 0},
		{"meter never denies", control.BillingMeter, control.Workspace{Allowance: &allowance},
			[]step{{600, "", 400}, {600, "", 0}, {600, "", 0}}, 1800, 0},
		{"enforce refuses whole", control.BillingEnforce, control.Workspace{Allowance: &allowance},
			[]step{{600, "", 400}, {401, control.EQuotaExhausted, 0}, {400, "", 0}, {1, control.EQuotaExhausted, 0}}, 1000, 0},
		{"credits after allowance", control.BillingEnforce, control.Workspace{Allowance: &allowance, Credits: 500},
			[]step{{1200, "", 300}, {301, control.EInsufficientCredits, 0}, {300, "", 0}}, 1000, 0},
		{"workspace override beats default", control.BillingOff, control.Workspace{Allowance: &allowance, Billing: control.BillingEnforce},
			[]step{{1001, control.EQuotaExhausted, 0}, {1000, "", 0}}, 1000, 0},
		{"plan allowance", control.BillingEnforce, control.Workspace{Plan: "free"},
			[]step{{10_000, "", 0}, {1, control.EQuotaExhausted, 0}}, 10_000, 0},
		{"unknown mode enforces", control.BillingOff, control.Workspace{Allowance: &allowance, Billing: "enforced"},
			[]step{{1001, control.EQuotaExhausted, 0}}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMeter(db, tc.def)
			ws := newWorkspace(t, db, &tc.ws)
			for i, s := range tc.steps {
				before, _ := db.Balance(ctx, ws.ID, control.Month(pinned), 0)
				_, rem, err := m.Charge(ctx, ws, s.chars)
				if s.code != "" {
					// The 402 body's used is the usage before the refused
					// request, and nothing was taken.
					e := control.AsError(err)
					after, _ := db.Balance(ctx, ws.ID, control.Month(pinned), 0)
					if e.Code != s.code || e.Unit != "character" ||
						e.Limit != ws.Limits("").MonthlyChars || e.Used != before.Used || after != before {
						t.Fatalf("step %d: got %v %+v, want %s with used %d", i, err, e, s.code, before.Used)
					}
					continue
				}
				if err != nil || rem != s.remaining {
					t.Fatalf("step %d: remaining %d %v, want %d", i, rem, err, s.remaining)
				}
				if r, err := m.Remaining(ctx, ws); err != nil || r != rem {
					t.Fatalf("step %d: Remaining %d %v, Charge said %d", i, r, err, rem)
				}
			}
			bal, err := db.Balance(ctx, ws.ID, control.Month(pinned), 0)
			if err != nil || bal.Used != tc.used || bal.Credits != tc.credit {
				t.Fatalf("store: %+v %v, want used %d credits %d", bal, err, tc.used, tc.credit)
			}
		})
	}
}

func TestMeterRefund(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	allowance := int64(1000)
	ws := newWorkspace(t, db, &control.Workspace{Allowance: &allowance, Credits: 200})
	m := newTestMeter(db, control.BillingEnforce)
	if _, _, err := m.Charge(ctx, ws, 900); err != nil {
		t.Fatal(err)
	}
	c, rem, err := m.Charge(ctx, ws, 250) // 100 of allowance, 150 of credits
	if err != nil || rem != 50 || c.FromAllowance != 100 || c.FromCredits != 150 || c.Month != "2026-11" {
		t.Fatalf("charge %+v rem %d %v", c, rem, err)
	}
	if err := m.Refund(ctx, c); err != nil {
		t.Fatal(err)
	}
	if r, _ := m.Remaining(ctx, ws); r != 300 {
		t.Fatalf("after refund remaining %d, want 300", r)
	}
	// Zero charges (billing off) refund without touching the store.
	if err := control.NewMeter(nil, control.BillingOff).Refund(ctx, control.Charge{}); err != nil {
		t.Fatal(err)
	}
}

// TestMeterConcurrentEnforce: simultaneous charges lose no update and never
// overdraw: of 20 charges of 100 on an allowance of 1000, exactly 10 pass.
func TestMeterConcurrentEnforce(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	allowance := int64(1000)
	ws := newWorkspace(t, db, &control.Workspace{Allowance: &allowance})
	m := newTestMeter(db, control.BillingEnforce)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, refused := 0, 0
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := m.Charge(ctx, ws, 100)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case control.IsCode(err, control.EQuotaExhausted):
				refused++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	bal, _ := db.Balance(ctx, ws.ID, control.Month(pinned), allowance)
	if ok != 10 || refused != 10 || bal.Used != 1000 {
		t.Fatalf("%d charged, %d refused, used %d", ok, refused, bal.Used)
	}
}

func TestChars(t *testing.T) {
	for s, want := range map[string]int64{"": 0, "hello": 5, "नमस्ते": 6, "😀a": 2, "e\u0301": 2, "\xff\xfe": 2} {
		if got := control.CountChars(s); got != want {
			t.Errorf("CountChars(%q) = %d, want %d", s, got, want)
		}
	}
}

// BenchmarkMeterLimitsAndBilling is the in-process cost that limits and
// billing add to one synthesis request: rate check, slot, charge against
// the SQLite store, release. Reports the p50 and p99.
func BenchmarkMeterLimitsAndBilling(b *testing.B) {
	ctx := context.Background()
	db := openStore(b)
	ws := newWorkspace(b, db, &control.Workspace{Plan: "enterprise"})
	lim := control.NewMemoryLimiter()
	m := control.NewMeter(db, control.BillingEnforce)
	l := ws.Limits(control.BillingEnforce)
	var lat []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		if _, err := lim.AllowRequest(ctx, ws.ID, l.RPS); err != nil {
			b.Fatal(err)
		}
		lease, _, err := lim.Acquire(ctx, ws.ID, control.SlotStream, l.Concurrency)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := m.Charge(ctx, ws, 1); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		lease.Release()
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// Check reads the balance and never charges: a zero balance in enforce mode
// is the error a 1-character charge gets, and the counters never move.
func TestMeterCheck(t *testing.T) {
	ctx := context.Background()
	db := openStore(t)
	zero, ten := int64(0), int64(10)
	for _, tc := range []struct {
		name string
		def  string
		ws   control.Workspace
		left int64
		code string
	}{
		{"off", control.BillingOff, control.Workspace{Allowance: &zero}, -1, ""},
		{"meter never refuses", control.BillingMeter, control.Workspace{Allowance: &zero}, 0, ""},
		{"allowance left", control.BillingEnforce, control.Workspace{Allowance: &ten}, 10, ""},
		{"credits left", control.BillingEnforce, control.Workspace{Allowance: &zero, Credits: 5}, 5, ""},
		{"allowance exhausted", control.BillingEnforce, control.Workspace{Allowance: &zero}, 0, control.EQuotaExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestMeter(db, tc.def)
			ws := newWorkspace(t, db, &tc.ws)
			before, _ := db.Balance(ctx, ws.ID, control.Month(pinned), 0)
			left, err := m.Check(ctx, ws)
			_, _, want := m.Charge(ctx, ws, 1) // what a real request would get
			if tc.code != "" {
				e, w := control.AsError(err), control.AsError(want)
				if e.Code != tc.code || e.Unit != w.Unit || e.Limit != w.Limit || e.Used != w.Used {
					t.Fatalf("Check: %+v, a 1-character charge: %+v", e, w)
				}
			} else if err != nil || left != tc.left {
				t.Fatalf("Check: %d %v, want %d", left, err, tc.left)
			}
			if want == nil {
				return // the charge above moved the counters, not Check
			}
			if after, _ := db.Balance(ctx, ws.ID, control.Month(pinned), 0); after != before {
				t.Fatalf("Check moved the balance: %+v -> %+v", before, after)
			}
		})
	}
	// Credits that run out: insufficient_credits, as a charge would say.
	ws := newWorkspace(t, db, &control.Workspace{Allowance: &zero, Credits: 3})
	m := newTestMeter(db, control.BillingEnforce)
	if _, _, err := m.Charge(ctx, ws, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Check(ctx, ws); control.ErrorCode(err) != control.EQuotaExhausted && control.ErrorCode(err) != control.EInsufficientCredits {
		t.Fatalf("Check after the credits ran out: %v", err)
	}
}
