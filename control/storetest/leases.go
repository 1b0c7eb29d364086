package storetest

import (
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
)

// testLeaseSlots: a holder's share is never more than the limit less the
// other holders' unexpired shares (concurrent holders included), "want 0"
// gives it back, and DropLeases gives back everything of a holder.
func testLeaseSlots(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "pro").ID
	const ttl = time.Minute
	held, free, err := s.LeaseSlots(ctx, "a", ws, control.SlotStream, 10, 0, 6, ttl)
	if err != nil || held != 6 || free != 4 {
		t.Fatalf("first share: held %d free %d %v; want 6 4", held, free, err)
	}
	if held, free, _ = s.LeaseSlots(ctx, "b", ws, control.SlotStream, 10, 0, 6, ttl); held != 4 || free != 0 {
		t.Fatalf("second share: held %d free %d; want 4 0", held, free)
	}
	// Another kind is another count.
	if held, _, _ = s.LeaseSlots(ctx, "b", ws, control.SlotSession, 4, 0, 4, ttl); held != 4 {
		t.Fatalf("session share %d, want 4", held)
	}
	if held, free, _ = s.LeaseSlots(ctx, "a", ws, control.SlotStream, 10, 0, 1, ttl); held != 1 || free != 5 {
		t.Fatalf("shrunk share: held %d free %d; want 1 5", held, free)
	}
	if err := s.RenewLeases(ctx, "a", ttl); err != nil {
		t.Fatal(err)
	}
	if err := s.DropLeases(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if held, free, _ = s.LeaseSlots(ctx, "c", ws, control.SlotStream, 10, 0, 20, ttl); held != 9 || free != 0 {
		t.Fatalf("after b dropped: held %d free %d; want 9 0", held, free)
	}
	// Concurrent holders asking for more than the limit together.
	ws2 := mustWorkspace(t, s, "pro").ID
	var total atomic.Int64
	parallel(8, func(i int) {
		h, _, err := s.LeaseSlots(ctx, string(rune('a'+i)), ws2, control.SlotStream, 20, 0, 7, ttl)
		if err != nil {
			t.Error(err)
		}
		total.Add(int64(h))
	})
	if total.Load() != 20 {
		t.Fatalf("concurrent shares sum to %d of 20", total.Load())
	}
	// A limit lowered under running streams: the holder keeps the slots
	// it uses, and they count against everyone else.
	if held, free, _ := s.LeaseSlots(ctx, "a", ws2, control.SlotStream, 5, 9, 9, ttl); held != 9 || free != 0 {
		t.Fatalf("slots in use beyond a lowered limit: held %d free %d; want 9 0", held, free)
	}
}

// testLeaseExpiry: a share and a reservation not renewed expire after
// their TTL, and then count for no one.
func testLeaseExpiry(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "pro").ID
	const short = 300 * time.Millisecond
	if held, _, _ := s.LeaseSlots(ctx, "dead", ws, control.SlotStream, 3, 0, 3, short); held != 3 {
		t.Fatalf("held %d", held)
	}
	set := control.BillingSettle{WS: ws, Month: month, Allowance: 100, Reserve: 100, Enforce: true}
	if r, err := s.SettleBilling(ctx, "dead", set, short); err != nil || r.Reserved != 100 {
		t.Fatalf("reservation %+v %v", r, err)
	}
	if held, _, _ := s.LeaseSlots(ctx, "live", ws, control.SlotStream, 3, 0, 3, time.Minute); held != 0 {
		t.Fatalf("a share beyond the limit: %d", held)
	}
	time.Sleep(2 * short)
	if held, _, _ := s.LeaseSlots(ctx, "live", ws, control.SlotStream, 3, 0, 3, time.Minute); held != 3 {
		t.Fatalf("after the TTL: held %d, want 3", held)
	}
	if r, _ := s.SettleBilling(ctx, "live", set, time.Minute); r.Reserved != 100 || r.Others != 0 {
		t.Fatalf("after the TTL: %+v", r)
	}
}

// testSettleBilling: usage settles by day (allowance first, then credits,
// then beyond the allowance; negative amounts give back), reservations
// never pass the balance less the others', metering reserves nothing,
// and an unknown workspace is ENotFound with nothing applied.
func testSettleBilling(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free").ID
	setBilling(t, s, ws, 50, 0)
	const ttl = time.Minute
	next := "2026-02"
	r, err := s.SettleBilling(ctx, "a", control.BillingSettle{WS: ws, Month: next, Allowance: 100,
		Usage: []control.DayChars{{Day: month + "-31", Chars: 120}, {Day: next + "-01", Chars: 10}}, Reserve: 1000, Enforce: true}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	// January: 100 from the allowance, 20 from credits; February: 10.
	if r.Used != 10 || r.Credits != 30 || r.Reserved != 120 || r.Others != 0 {
		t.Fatalf("after settle: %+v; want used 10, credits 30, reserved 120", r)
	}
	if b, _ := s.Balance(ctx, ws, month, 100); b.Used != 100 {
		t.Fatalf("January used %d, want 100", b.Used)
	}
	days, err := s.DailyUsage(ctx, ws, month+"-01", next+"-28")
	if err != nil || len(days) != 2 || days[0].Characters != 120 || days[1].Characters != 10 {
		t.Fatalf("daily %+v %v", days, err)
	}
	// Another holder gets what is left; metering reserves nothing.
	if r, _ := s.SettleBilling(ctx, "b", control.BillingSettle{WS: ws, Month: next, Allowance: 100, Reserve: 1000, Enforce: true}, ttl); r.Reserved != 0 || r.Others != 120 {
		t.Fatalf("second holder: %+v; want reserved 0, others 120", r)
	}
	if r, _ := s.SettleBilling(ctx, "a", control.BillingSettle{WS: ws, Month: next, Allowance: 100, Reserve: 40, Enforce: true,
		Usage: []control.DayChars{{Day: next + "-01", Chars: -5}}}, ttl); r.Reserved != 40 || r.Used != 5 {
		t.Fatalf("give back 5, shrink to 40: %+v", r)
	}
	if r, _ := s.SettleBilling(ctx, "b", control.BillingSettle{WS: ws, Month: next, Allowance: 100, Reserve: 1000, Enforce: true}, ttl); r.Reserved != 85 || r.Others != 40 {
		t.Fatalf("second holder after the shrink: %+v; want 85 (100-5+30-40)", r)
	}
	if r, _ := s.SettleBilling(ctx, "c", control.BillingSettle{WS: ws, Month: next, Allowance: 100, Reserve: 1000}, ttl); r.Reserved != 0 {
		t.Fatalf("metering reserved %d", r.Reserved)
	}
	if err := s.DropLeases(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.SettleBilling(ctx, "b", control.BillingSettle{WS: ws, Month: next, Allowance: 100, Reserve: 1000, Enforce: true}, ttl); r.Reserved != 125 || r.Others != 0 {
		t.Fatalf("after a dropped: %+v; want 125", r)
	}
	if _, err := s.SettleBilling(ctx, "a", control.BillingSettle{WS: "nope000000000000000000000", Month: next, Allowance: 100,
		Usage: []control.DayChars{{Day: next + "-01", Chars: 1}}}, ttl); !control.IsCode(err, control.ENotFound) {
		t.Fatalf("unknown workspace: %v", err)
	}
}

// testLeaseRequests: shares of the rps window are never more than the
// limit less what the window holds (concurrent askers included), a full
// window says when it admits one more, a give-back frees its requests,
// and a second later the window is empty again.
func testLeaseRequests(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "pro").ID
	g1, err := s.LeaseRequests(ctx, ws, 100, 30, control.RequestsBack{})
	if err != nil || g1.Granted != 30 || g1.Remaining != 70 || g1.ResetMS != 0 {
		t.Fatalf("first share: %+v %v; want 30 granted, 70 remaining", g1, err)
	}
	if g, _ := s.LeaseRequests(ctx, ws, 100, 80, control.RequestsBack{}); g.Granted != 70 || g.Remaining != 0 {
		t.Fatalf("second share: %+v; want what is left, 70", g)
	}
	g, err := s.LeaseRequests(ctx, ws, 100, 5, control.RequestsBack{})
	if err != nil || g.Granted != 0 || g.ResetMS <= 0 || g.ResetMS > 1016 { // Postgres: 16 ms buckets above 64 rps
		t.Fatalf("full window: %+v %v; want nothing, reset within a second (and a bucket)", g, err)
	}
	// 10 of the first share unused come back, once.
	if g, _ := s.LeaseRequests(ctx, ws, 100, 20, control.RequestsBack{At: g1.At, N: 10}); g.Granted != 10 {
		t.Fatalf("after giving back 10: %+v", g)
	}
	// Concurrent askers wanting more than the limit together.
	ws2 := mustWorkspace(t, s, "pro").ID
	var total atomic.Int64
	parallel(8, func(int) {
		g, err := s.LeaseRequests(ctx, ws2, 100, 20, control.RequestsBack{})
		if err != nil {
			t.Error(err)
		}
		total.Add(int64(g.Granted))
	})
	if total.Load() != 100 {
		t.Fatalf("concurrent shares sum to %d of 100", total.Load())
	}
	time.Sleep(1100 * time.Millisecond)
	// The window moved on: a give-back of an expired share frees nothing
	// more than the window has.
	if g, _ := s.LeaseRequests(ctx, ws, 100, 200, control.RequestsBack{At: g1.At, N: 20}); g.Granted != 100 || g.Remaining != 0 {
		t.Fatalf("a second later: %+v; want the whole limit", g)
	}
}
