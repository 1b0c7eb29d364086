package postgres_test

import (
	"testing"
	"time"

	"voicesvc/control"
)

// TestLeasesWithOldServers: a rolling upgrade, old servers (a slot row per
// request, a charge per request) and new ones (shares and reservations) on
// one database, keeps one limit and one balance: each side counts the
// other's.
func TestLeasesWithOldServers(t *testing.T) {
	db := MustOpenDB(t, MustSchemaDSN(t))
	ctx := t.Context()
	w := &control.Workspace{Name: "w", Plan: "pro"}
	if err := db.CreateWorkspace(ctx, w); err != nil {
		t.Fatal(err)
	}
	old := db.Limiter("old-server")
	t.Cleanup(old.Close)

	// Slots: the old server's per-request rows count against a share,
	// and a share against the old server's requests.
	var leases []control.Lease
	for i := 0; i < 3; i++ {
		l, _, err := old.Acquire(ctx, w.ID, control.SlotStream, 10)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	held, free, err := db.LeaseSlots(ctx, "new-server", w.ID, control.SlotStream, 10, 0, 10, time.Minute)
	if err != nil || held != 7 || free != 0 {
		t.Fatalf("share beside 3 old slots: held %d free %d %v; want 7 0", held, free, err)
	}
	if _, _, err := old.Acquire(ctx, w.ID, control.SlotStream, 10); !control.IsCode(err, control.EConcurrencyLimited) {
		t.Fatalf("old server past the limit beside a share: %v", err)
	}
	for _, l := range leases {
		l.Release()
	}

	// Requests per second: the old server's per-request admissions count
	// against a share of the window, and a share against them.
	for i := 0; i < 30; i++ {
		if _, err := old.AllowRequest(ctx, w.ID, 100); err != nil {
			t.Fatal(err)
		}
	}
	g, err := db.LeaseRequests(ctx, w.ID, 100, 100, control.RequestsBack{})
	if err != nil || g.Granted != 70 || g.Remaining != 0 {
		t.Fatalf("share beside 30 old requests: %+v %v; want 70", g, err)
	}
	if _, err := old.AllowRequest(ctx, w.ID, 100); !control.IsCode(err, control.ERateLimited) {
		t.Fatalf("old server past the window beside a share: %v", err)
	}

	// Billing: an old server's charge leaves the reservations alone.
	month := control.Month(time.Now())
	r, err := db.SettleBilling(ctx, "new-server", control.BillingSettle{WS: w.ID, Month: month, Allowance: 100,
		Reserve: 80, Enforce: true}, time.Minute)
	if err != nil || r.Reserved != 80 {
		t.Fatalf("reservation %+v %v", r, err)
	}
	if _, _, err := db.Charge(ctx, w.ID, month, 100, 21, true); !control.IsCode(err, control.EQuotaExhausted) {
		t.Fatalf("old charge of 21 beside a reservation of 80 of 100: %v", err)
	}
	if c, _, err := db.Charge(ctx, w.ID, month, 100, 20, true); err != nil || c.FromAllowance != 20 {
		t.Fatalf("old charge of 20: %+v %v", c, err)
	}
	if r, _ := db.SettleBilling(ctx, "other", control.BillingSettle{WS: w.ID, Month: month, Allowance: 100,
		Reserve: 80, Enforce: true}, time.Minute); r.Reserved != 0 || r.Used != 20 || r.Others != 80 {
		t.Fatalf("after the old charge: %+v", r)
	}
}
