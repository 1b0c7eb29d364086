package postgres_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"voicesvc/control"
)

// TestChargeRefundRace: covered charges (the upsert fast path), charges that
// cross into credits (the locking path), refunds and workspace updates, all
// at once on two servers. Any lock-order inversion between them shows as a
// deadlock error; any lost update as a wrong balance at the end.
func TestChargeRefundRace(t *testing.T) {
	dsn := MustSchemaDSN(t)
	a, b := MustOpenDB(t, dsn), MustOpenDB(t, dsn)
	ctx := t.Context()
	const month, allowance, credits = "2026-01", 300, 300
	ws := &control.Workspace{Name: "race", Credits: credits}
	if err := a.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	var fromA, fromC atomic.Int64
	var wg sync.WaitGroup
	for i := range 400 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := a
			if i%2 == 1 {
				s = b
			}
			if i%50 == 0 {
				// Admin updates take the workspace lock (plan only, so
				// that the balance stays checkable).
				if _, err := s.UpdateWorkspace(ctx, ws.ID, control.WorkspaceUpdate{Plan: ptr("pro")}); err != nil {
					t.Error(err)
				}
				return
			}
			c, _, err := s.Charge(ctx, ws.ID, month, allowance, int64(i%3+1), true)
			if err != nil {
				if !control.IsCode(err, control.EInsufficientCredits) && !control.IsCode(err, control.EQuotaExhausted) {
					t.Error(err)
				}
				return
			}
			if i%3 == 0 { // give some back, both parts at once
				if err := s.Refund(ctx, c); err != nil {
					t.Error(err)
				}
				return
			}
			fromA.Add(c.FromAllowance)
			fromC.Add(c.FromCredits)
		}()
	}
	wg.Wait()
	bal, err := a.Balance(ctx, ws.ID, month, allowance)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Used != fromA.Load() || credits-bal.Credits != fromC.Load() || bal.Used > allowance || bal.Credits < 0 {
		t.Fatalf("stored used %d credits %d; kept charges took %d and %d", bal.Used, bal.Credits, fromA.Load(), fromC.Load())
	}
}
