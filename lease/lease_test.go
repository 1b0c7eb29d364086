package lease

import (
	"context"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
)

var bg = context.Background()

func ws(id string, plan string, mods ...func(*control.Workspace)) *control.Workspace {
	w := &control.Workspace{ID: id, Plan: plan, Billing: control.BillingEnforce}
	for _, f := range mods {
		f(w)
	}
	return w
}

// take acquires n slots of ws on m, returning the leases and refusals.
func take(t *testing.T, m *Manager, id string, limit, n int) (got []control.Lease, refused int) {
	t.Helper()
	for i := 0; i < n; i++ {
		l, _, err := m.Acquire(bg, id, control.SlotStream, limit)
		switch {
		case err == nil:
			got = append(got, l)
		case control.IsCode(err, control.EConcurrencyLimited):
			refused++
		default:
			t.Fatalf("acquire: %v", err)
		}
	}
	return got, refused
}

// TestSlotsNeverExceedLimitAcrossServers: three servers share a limit
// (small, exact, and large with headroom); whatever they take at once, in
// any order and concurrently, the store never counts more than the limit
// and every server's slots in use are within its share.
func TestSlotsNeverExceedLimitAcrossServers(t *testing.T) {
	for _, limit := range []int{1, 2, 5, 15, 16, 50, 1000} {
		f := newFakeStore(newClock())
		var ms []*Manager
		for i := 0; i < 3; i++ {
			ms = append(ms, newTestManager(f, Config{}))
		}
		var wg sync.WaitGroup
		var mu sync.Mutex
		var leases []control.Lease
		total := 0
		for _, m := range ms {
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func(m *Manager) {
					defer wg.Done()
					for i := 0; i < limit; i++ {
						l, _, err := m.Acquire(bg, "w", control.SlotStream, limit)
						if err != nil {
							if !control.IsCode(err, control.EConcurrencyLimited) {
								t.Errorf("acquire: %v", err)
							}
							continue
						}
						mu.Lock()
						leases = append(leases, l)
						total++
						mu.Unlock()
					}
				}(m)
			}
		}
		wg.Wait()
		if total > limit {
			t.Fatalf("limit %d: %d slots in use across servers", limit, total)
		}
		if total < limit {
			t.Fatalf("limit %d: only %d slots granted although all were asked for", limit, total)
		}
		if held := f.held("w", control.SlotStream); held > limit {
			t.Fatalf("limit %d: the store counts %d", limit, held)
		}
		for _, m := range ms {
			st := m.Stats().Slots[control.SlotStream]
			if st.InUse > st.Held {
				t.Fatalf("limit %d: %d in use on a share of %d", limit, st.InUse, st.Held)
			}
		}
		for _, l := range leases {
			l.Release()
		}
	}
}

// TestSmallPlansExact: below ExactBelow a share is exactly the slots in
// use, and a slot freed on one server is another's after the next sync
// (no headroom ever keeps a Free workspace's second stream away).
func TestSmallPlansExact(t *testing.T) {
	f := newFakeStore(newClock())
	a, b := newTestManager(f, Config{}), newTestManager(f, Config{})
	la, _ := take(t, a, "free", 2, 1)
	if st := a.Stats().Slots[control.SlotStream]; st.Held != 1 {
		t.Fatalf("share %d for 1 in use on limit 2", st.Held)
	}
	lb, refused := take(t, b, "free", 2, 2)
	if len(lb) != 1 || refused != 1 {
		t.Fatalf("second server got %d, refused %d; want 1 and 1", len(lb), refused)
	}
	la[0].Release()
	a.syncAll(bg, false, false) // the kick's sync: the slot goes back
	if got, _ := take(t, b, "free", 2, 1); len(got) != 1 {
		t.Fatal("a slot freed on one server is not another's after the sync")
	}
}

// TestHeadroomBounded: a large limit's share grows with demand, never past
// in use + min(SlotBatch, limit/8), and shrinks back once idle.
func TestHeadroomBounded(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{SlotBatch: 8})
	got, _ := take(t, m, "big", 100_000, 40)
	st := m.Stats().Slots[control.SlotStream]
	if st.InUse != 40 || st.Held > 40+8 {
		t.Fatalf("share %d for %d in use, SlotBatch 8", st.Held, st.InUse)
	}
	if calls := f.calls; calls > 10 {
		t.Fatalf("%d store calls for 40 slots: the share does not grow in batches", calls)
	}
	for _, l := range got {
		l.Release()
	}
	f.clk.add(Defaults.Idle)
	m.syncAll(bg, true, false)
	if held := f.held("big", control.SlotStream); held != 0 {
		t.Fatalf("an idle workspace keeps %d slots in the store", held)
	}
}

// TestLeaseExpires: a server that dies (never renews nor gives back)
// leaves its share in the store until the TTL; then another server gets
// the whole limit.
func TestLeaseExpires(t *testing.T) {
	f := newFakeStore(newClock())
	dead, live := newTestManager(f, Config{TTL: 5 * time.Second}), newTestManager(f, Config{TTL: 5 * time.Second})
	take(t, dead, "w", 4, 4)
	if got, _ := take(t, live, "w", 4, 1); len(got) != 0 {
		t.Fatal("a slot beyond the limit")
	}
	f.clk.add(5 * time.Second)
	if got, _ := take(t, live, "w", 4, 4); len(got) != 4 {
		t.Fatalf("after the TTL the other server got %d of 4", len(got))
	}
}

// TestAdminChangeShrinks: a lower limit brought by the next request (after
// Invalidate, as the change feed does) shrinks the share in the store at
// once, and slots beyond the new limit are refused.
func TestAdminChangeShrinks(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{})
	got, _ := take(t, m, "w", 64, 10)
	if held := f.held("w", control.SlotStream); held <= 10 {
		t.Fatalf("share %d: no headroom to shrink", held)
	}
	for _, l := range got[5:] {
		l.Release()
	}
	m.Invalidate("w")
	if _, refused := take(t, m, "w", 5, 1); refused != 1 {
		t.Fatal("a slot beyond the lowered limit")
	}
	if held := f.held("w", control.SlotStream); held > 5 {
		t.Fatalf("the store still counts %d slots for a limit of 5", held)
	}
}

// TestOutageServesLeasesThen503: with the store unreachable a server
// serves from its share until the share expires locally, then answers
// store_unavailable; it never admits past its share.
func TestOutageServesLeasesThen503(t *testing.T) {
	f := newFakeStore(newClock())
	m := newTestManager(f, Config{TTL: 10 * time.Second, SlotBatch: 4})
	got, _ := take(t, m, "w", 1000, 2)
	share := m.Stats().Slots[control.SlotStream].Held
	f.setDown(true)
	admitted := 0
	for i := 0; i < 100; i++ {
		l, _, err := m.Acquire(bg, "w", control.SlotStream, 1000)
		if err == nil {
			admitted++
			got = append(got, l)
			continue
		}
		if !control.StoreUnavailable(err) {
			t.Fatalf("refusal during the outage: %v", err)
		}
	}
	if admitted+2 != share {
		t.Fatalf("admitted %d during the outage on a share of %d (2 in use)", admitted, share)
	}
	for _, l := range got {
		l.Release()
	}
	f.clk.add(9 * time.Second) // past the local expiry (9/10 of TTL)
	if _, _, err := m.Acquire(bg, "w", control.SlotStream, 1000); !control.StoreUnavailable(err) {
		t.Fatalf("an expired share still serves: %v", err)
	}
	// Billing: the reservation in hand, then 503, never more.
	f.setDown(false)
	w := ws("w", "pro")
	if _, _, err := m.Meter().Charge(bg, w, 10); err != nil {
		t.Fatal(err)
	}
	f.setDown(true)
	var charged int64
	for i := 0; i < 10_000; i++ {
		if _, _, err := m.Meter().Charge(bg, w, 10); err != nil {
			if !control.StoreUnavailable(err) {
				t.Fatalf("charge during the outage: %v", err)
			}
			break
		}
		charged += 10
	}
	if charged == 0 || charged > Defaults.CharBatch {
		t.Fatalf("charged %d during the outage, reservation at most %d", charged, Defaults.CharBatch)
	}
}

// TestReservationsNeverOverdraw: three servers charging a small balance
// concurrently never charge more than it, and once settled the usage is
// exactly what they charged, less refunds.
func TestReservationsNeverOverdraw(t *testing.T) {
	f := newFakeStore(newClock())
	f.credits["w"] = 500
	w := ws("w", "free", func(w *control.Workspace) { a := int64(0); w.Allowance = &a })
	var ms []*Manager
	for i := 0; i < 3; i++ {
		ms = append(ms, newTestManager(f, Config{}))
	}
	var mu sync.Mutex
	var charged, refunded int64
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m := ms[i%3]
			c, rem, err := m.Meter().Charge(bg, w, 7)
			if err != nil {
				if !control.IsCode(err, control.EInsufficientCredits) && !control.IsCode(err, control.EQuotaExhausted) {
					t.Errorf("charge: %v", err)
				}
				return
			}
			if rem > 500 {
				t.Errorf("X-Billing-Remaining %d above the balance", rem)
			}
			mu.Lock()
			charged += 7
			if i%10 == 0 {
				refunded += 7
				mu.Unlock()
				_ = m.Meter().Refund(bg, c)
				return
			}
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	for _, m := range ms {
		if err := m.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	spent := 500 - f.credits["w"] + f.used["w/2026-03"]
	if f.credits["w"] < 0 || spent != charged-refunded {
		t.Fatalf("credits %d, used %d: spent %d, charged %d less refunds %d", f.credits["w"], f.used["w/2026-03"], spent, charged, refunded)
	}
	if charged-refunded > 500 {
		t.Fatalf("charged %d (refunded %d) of 500", charged, refunded)
	}
}

// TestUsageCountsWhenSynthesized: characters count in the month and on the
// day they were charged, even when settled after midnight of the month's
// last day; a reservation is not usage.
func TestUsageCountsWhenSynthesized(t *testing.T) {
	clk := newClock() // 23:59 on March 31st
	f := newFakeStore(clk)
	m := newTestManager(f, Config{})
	w := ws("w", "pro")
	if _, _, err := m.Meter().Charge(bg, w, 30); err != nil {
		t.Fatal(err)
	}
	if f.used["w/2026-03"] != 0 {
		t.Fatalf("a reservation counted as used: %d", f.used["w/2026-03"])
	}
	clk.add(2 * time.Minute) // April
	if _, _, err := m.Meter().Charge(bg, w, 4); err != nil {
		t.Fatal(err)
	}
	m.syncAll(bg, true, false)
	if f.used["w/2026-03"] != 30 || f.used["w/2026-04"] != 4 || f.daily["w/2026-03-31"] != 30 || f.daily["w/2026-04-01"] != 4 {
		t.Fatalf("used %v, daily %v", f.used, f.daily)
	}
}

// TestRemainingHeader: X-Billing-Remaining on one server is exactly the
// balance after the charge; with another server holding a reservation it
// is the balance less that reservation.
func TestRemainingHeader(t *testing.T) {
	f := newFakeStore(newClock())
	a, b := newTestManager(f, Config{}), newTestManager(f, Config{})
	w := ws("w", "free") // 10,000 characters
	for i, n := range []int64{5, 2, 40} {
		_, rem, err := a.Meter().Charge(bg, w, n)
		if err != nil {
			t.Fatal(err)
		}
		want := []int64{9995, 9993, 9953}[i]
		if rem != want {
			t.Fatalf("remaining %d after charge %d, want %d", rem, i, want)
		}
	}
	resA := f.res["w"][a.Holder()].n
	_, rem, err := b.Meter().Charge(bg, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rem > 9953-1 || rem < 9953-1-resA {
		t.Fatalf("remaining %d on the second server; balance 9952, first server reserves %d", rem, resA)
	}
}

// TestNoSlotFromAShrinkingShare: while a call that shrinks the share is in
// flight, the server takes no slot beyond what it asked for, so the slot it
// gives back cannot be used both here and by the server that gets it.
func TestNoSlotFromAShrinkingShare(t *testing.T) {
	f := newFakeStore(newClock())
	a, b := newTestManager(f, Config{}), newTestManager(f, Config{})
	got, _ := take(t, a, "free", 2, 2)
	got[0].Release()
	got[1].Release() // a: none in use of a share of 2
	gate := make(chan struct{})
	f.mu.Lock()
	f.gate = gate
	f.mu.Unlock()
	shrunk := make(chan struct{})
	go func() { a.syncAll(bg, false, false); close(shrunk) }() // gives both back
	for a.Stats().Slots[control.SlotStream].Held != 2 || !syncing(a) {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if _, _, err := a.Acquire(ctx, "free", control.SlotStream, 2); err == nil {
		t.Fatal("a slot taken from the part of the share being given back")
	}
	f.mu.Lock()
	f.gate = nil
	f.mu.Unlock()
	close(gate)
	<-shrunk
	if lb, _ := take(t, b, "free", 2, 2); len(lb) != 2 {
		t.Fatal("the slots given back are not the other server's")
	}
}

func syncing(m *Manager) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.pools {
		p.mu.Lock()
		s := p.syncing != nil
		p.mu.Unlock()
		if s {
			return true
		}
	}
	return false
}
