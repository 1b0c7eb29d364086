package storetest

import (
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
)

const month = "2026-01"

// setBilling gives ws credits and this test month's used characters.
func setBilling(t *testing.T, s control.Store, ws string, credits, used int64) {
	t.Helper()
	if _, err := s.UpdateWorkspace(t.Context(), ws, control.WorkspaceUpdate{Credits: &credits}); err != nil {
		t.Fatal(err)
	}
	if used > 0 {
		c, _, err := s.Charge(t.Context(), ws, month, used, used, true)
		if err != nil || c.FromAllowance != used {
			t.Fatalf("preparing used=%d: %+v %v", used, c, err)
		}
	}
}

func testCharge(t *testing.T, s control.Store) {
	ctx := t.Context()
	tests := []struct {
		name                 string
		allowance, used, cr  int64
		chars                int64
		enforce              bool
		code                 string
		fromA, fromC         int64
		afterUsed, afterCred int64
	}{
		{"within allowance", 100, 10, 0, 50, true, "", 50, 0, 60, 0},
		{"exactly the rest", 100, 10, 0, 90, true, "", 90, 0, 100, 0},
		{"allowance then credits", 100, 90, 50, 30, true, "", 10, 20, 100, 30},
		{"credits only", 100, 100, 50, 50, true, "", 0, 50, 100, 0},
		{"no credits: quota exhausted", 100, 90, 0, 11, true, control.EQuotaExhausted, 0, 0, 90, 0},
		{"credits short: insufficient", 100, 90, 5, 16, true, control.EInsufficientCredits, 0, 0, 90, 5},
		{"meter never denies", 100, 90, 5, 20, false, "", 15, 5, 105, 0},
		{"zero chars", 100, 100, 0, 0, true, "", 0, 0, 100, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws := mustWorkspace(t, s, "free")
			setBilling(t, s, ws.ID, tt.cr, tt.used)
			c, bal, err := s.Charge(ctx, ws.ID, month, tt.allowance, tt.chars, tt.enforce)
			if tt.code != "" {
				wantCode(t, err, tt.code)
				e := control.AsError(err)
				if e.Unit != "character" || e.Limit != tt.allowance || e.Used != tt.used {
					t.Fatalf("refusal details %+v", e)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if c.FromAllowance != tt.fromA || c.FromCredits != tt.fromC || c.WorkspaceID != ws.ID || c.Month != month ||
				bal.Used != tt.afterUsed || bal.Credits != tt.afterCred || bal.Allowance != tt.allowance {
				t.Fatalf("charge %+v balance %+v", c, bal)
			}
			got, err := s.Balance(ctx, ws.ID, month, tt.allowance)
			if err != nil || got.Used != tt.afterUsed || got.Credits != tt.afterCred {
				t.Fatalf("stored balance %+v %v, want used %d credits %d", got, err, tt.afterUsed, tt.afterCred)
			}
		})
	}
	_, _, err := s.Charge(ctx, control.NewID(), month, 10, 1, true)
	wantCode(t, err, control.ENotFound)
	// Months are separate.
	ws := mustWorkspace(t, s, "free")
	setBilling(t, s, ws.ID, 0, 10)
	if bal, err := s.Balance(ctx, ws.ID, "2026-02", 10); err != nil || bal.Used != 0 {
		t.Fatalf("next month %+v %v", bal, err)
	}
}

func testRefund(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	setBilling(t, s, ws.ID, 50, 90)
	c, _, err := s.Charge(ctx, ws.ID, month, 100, 30, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Refund(ctx, c); err != nil {
		t.Fatal(err)
	}
	if bal, _ := s.Balance(ctx, ws.ID, month, 100); bal.Used != 90 || bal.Credits != 50 {
		t.Fatalf("after refund %+v", bal)
	}
}

// testChargeConcurrent: 1,000 small charges at once never lose an update:
// what was taken equals what the successes were told they took, and the
// refusals start exactly when the balance runs out.
func testChargeConcurrent(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	const allowance, credits = 700, 300
	setBilling(t, s, ws.ID, credits, 0)
	var fromA, fromC, refused atomic.Int64
	parallel(1000, func(i int) {
		chars := int64(i%3 + 1)
		c, _, err := s.Charge(ctx, ws.ID, month, allowance, chars, true)
		switch {
		case err == nil:
			fromA.Add(c.FromAllowance)
			fromC.Add(c.FromCredits)
		case control.IsCode(err, control.EInsufficientCredits) || control.IsCode(err, control.EQuotaExhausted):
			refused.Add(1)
		default:
			t.Errorf("charge: %v", err)
		}
	})
	bal, err := s.Balance(ctx, ws.ID, month, allowance)
	if err != nil {
		t.Fatal(err)
	}
	if bal.Used != fromA.Load() || credits-bal.Credits != fromC.Load() {
		t.Fatalf("stored used %d credits %d; successes took %d and %d", bal.Used, bal.Credits, fromA.Load(), fromC.Load())
	}
	if refused.Load() == 0 || bal.Remaining() > 2 {
		t.Fatalf("%d refusals with %d remaining: 2,000 characters asked of 1,000", refused.Load(), bal.Remaining())
	}
}

func testIdempotency(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free").ID
	now := control.NowMS()
	begin := func(key, fp string, at int64) (*control.IdempotentResponse, error) {
		return s.BeginIdempotent(ctx, ws, key, fp, at)
	}
	if r, err := begin("k1", "fp", now); r != nil || err != nil {
		t.Fatalf("first begin: %v %v", r, err)
	}
	_, err := begin("k1", "fp", now)
	wantCode(t, err, control.EIdempotencyInProgress)
	_, err = begin("k1", "other", now)
	wantCode(t, err, control.EIdempotencyKeyReused)
	// Keys are per workspace.
	if r, err := s.BeginIdempotent(ctx, mustWorkspace(t, s, "free").ID, "k1", "other", now); r != nil || err != nil {
		t.Fatalf("other workspace: %v %v", r, err)
	}
	resp := &control.IdempotentResponse{Status: 201, Headers: map[string]string{"Content-Type": "audio/wav"}, Body: []byte{0, 1, 2}}
	if err := s.FinishIdempotent(ctx, ws, "k1", resp); err != nil {
		t.Fatal(err)
	}
	r, err := begin("k1", "fp", now+1000)
	if err != nil || r == nil || r.Status != 201 || r.Headers["Content-Type"] != "audio/wav" || string(r.Body) != "\x00\x01\x02" {
		t.Fatalf("replay %+v %v", r, err)
	}
	_, err = begin("k1", "other", now)
	wantCode(t, err, control.EIdempotencyKeyReused)
	// After 24 hours the key is forgotten.
	later := now + control.IdempotencyTTL.Milliseconds() + 1
	if r, err := begin("k1", "other", later); r != nil || err != nil {
		t.Fatalf("after 24h: %v %v", r, err)
	}
	// Abandoning frees an in-progress key; done keys stay.
	if r, err := begin("k2", "fp", now); r != nil || err != nil {
		t.Fatal(r, err)
	}
	if err := s.AbandonIdempotent(ctx, ws, "k2"); err != nil {
		t.Fatal(err)
	}
	if r, err := begin("k2", "fp2", now); r != nil || err != nil {
		t.Fatalf("after abandon: %v %v", r, err)
	}
	if err := s.FinishIdempotent(ctx, ws, "k2", &control.IdempotentResponse{Status: 200}); err != nil {
		t.Fatal(err)
	}
	if err := s.AbandonIdempotent(ctx, ws, "k2"); err != nil {
		t.Fatal(err)
	}
	if r, err := begin("k2", "fp2", now); err != nil || r == nil || r.Status != 200 || r.Body == nil {
		t.Fatalf("done key after abandon: %+v %v", r, err)
	}
}

func testIdempotencyConcurrent(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free").ID
	now := time.Now().UnixMilli()
	var run, busy atomic.Int32
	parallel(20, func(int) {
		r, err := s.BeginIdempotent(ctx, ws, "same", "fp", now)
		switch {
		case err == nil && r == nil:
			run.Add(1)
		case control.IsCode(err, control.EIdempotencyInProgress):
			busy.Add(1)
		default:
			t.Errorf("begin: %v %v", r, err)
		}
	})
	if run.Load() != 1 || busy.Load() != 19 {
		t.Fatalf("%d ran, %d in progress; want 1 and 19", run.Load(), busy.Load())
	}
}
