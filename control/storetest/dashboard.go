package storetest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
)

func testLoginLink(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	now := control.NowMS()
	l := &control.LoginLink{Hash: hash("link"), WorkspaceID: ws.ID, ExpiresAt: now + 60_000}
	if err := s.CreateLoginLink(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.CreateLoginLink(ctx, &control.LoginLink{Hash: hash("x"), WorkspaceID: control.NewID(),
		ExpiresAt: now + 60_000}), control.ENotFound)

	sess := &control.DashboardSession{Hash: hash("session")}
	if err := s.RedeemLoginLink(ctx, hash("link"), now, sess); err != nil {
		t.Fatal(err)
	}
	if sess.WorkspaceID != ws.ID || !control.ValidID(sess.ID) || sess.CreatedAt != now ||
		sess.ExpiresAt != now+control.DashboardSessionTTL.Milliseconds() {
		t.Fatalf("session %+v", sess)
	}
	// Single use; unknown and expired links are refused alike.
	wantCode(t, s.RedeemLoginLink(ctx, hash("link"), now, &control.DashboardSession{Hash: hash("s2")}), control.EUnauthorized)
	wantCode(t, s.RedeemLoginLink(ctx, hash("never"), now, &control.DashboardSession{Hash: hash("s3")}), control.EUnauthorized)
	if err := s.CreateLoginLink(ctx, &control.LoginLink{Hash: hash("old"), WorkspaceID: ws.ID, ExpiresAt: now + 10}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.RedeemLoginLink(ctx, hash("old"), now+10, &control.DashboardSession{Hash: hash("s4")}), control.EUnauthorized)
}

// testLoginLinkConcurrent: of 20 redemptions of one link at once exactly
// one starts a session.
func testLoginLinkConcurrent(t *testing.T, s control.Store) {
	ws := mustWorkspace(t, s, "free")
	now := control.NowMS()
	if err := s.CreateLoginLink(t.Context(), &control.LoginLink{Hash: hash("link"), WorkspaceID: ws.ID,
		ExpiresAt: now + 60_000}); err != nil {
		t.Fatal(err)
	}
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.RedeemLoginLink(t.Context(), hash("link"), now, &control.DashboardSession{Hash: hash(string(rune('a' + i)))})
			switch {
			case err == nil:
				ok.Add(1)
			case control.ErrorCode(err) == control.EUnauthorized:
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 1 || refused.Load() != 19 {
		t.Fatalf("%d redeemed, %d refused; want 1 and 19", ok.Load(), refused.Load())
	}
}

func testDashboardSession(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	now := control.NowMS()
	if err := s.CreateLoginLink(ctx, &control.LoginLink{Hash: hash("link"), WorkspaceID: ws.ID, ExpiresAt: now + 60_000}); err != nil {
		t.Fatal(err)
	}
	if err := s.RedeemLoginLink(ctx, hash("link"), now, &control.DashboardSession{Hash: hash("session")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetDashboardSession(ctx, hash("session"), now+1)
	if err != nil || got.WorkspaceID != ws.ID || string(got.Hash) != string(hash("session")) {
		t.Fatalf("session %+v %v", got, err)
	}
	end := now + control.DashboardSessionTTL.Milliseconds()
	_, err = s.GetDashboardSession(ctx, hash("session"), end)
	wantCode(t, err, control.EUnauthorized)
	_, err = s.GetDashboardSession(ctx, hash("unknown"), now)
	wantCode(t, err, control.EUnauthorized)
	if err := s.DeleteDashboardSession(ctx, hash("session")); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetDashboardSession(ctx, hash("session"), now+1)
	wantCode(t, err, control.EUnauthorized)
	if err := s.DeleteDashboardSession(ctx, hash("session")); err != nil {
		t.Fatalf("second sign-out: %v", err)
	}
}

func testListAPIKeys(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws, other := mustWorkspace(t, s, "free"), mustWorkspace(t, s, "free")
	mustKey(t, s, other.ID)
	var ids []string
	for i, name := range []string{"ci", "", "laptop"} {
		k := &control.APIKey{WorkspaceID: ws.ID, Name: name, Hash: hash(name + "key"), Scopes: []string{control.ScopeTTS},
			CreatedAt: int64(1000 + i)}
		if err := s.CreateAPIKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, k.ID)
	}
	if _, err := s.RevokeAPIKey(ctx, ids[0], 5000); err != nil {
		t.Fatal(err)
	}
	keys, err := s.ListAPIKeys(ctx, ws.ID)
	if err != nil || len(keys) != 3 {
		t.Fatalf("keys %v %v", keys, err)
	}
	if keys[0].ID != ids[2] || keys[0].Name != "laptop" || keys[2].ID != ids[0] || keys[2].RevokedAt != 5000 ||
		len(keys[1].Scopes) != 1 || keys[1].Scopes[0] != control.ScopeTTS {
		t.Fatalf("keys %+v %+v %+v", keys[0], keys[1], keys[2])
	}
	if keys, err := s.ListAPIKeys(ctx, control.NewID()); err != nil || len(keys) != 0 {
		t.Fatalf("unknown workspace: %v %v", keys, err)
	}
}

// testDailyUsage: every path of Charge adds what it took to the day of the
// charge, a refusal adds nothing, and a refund subtracts from the charge's day.
func testDailyUsage(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	today := control.Day(time.Now())
	charge := func(allowance, chars int64, enforce bool) (control.Charge, error) {
		t.Helper()
		c, _, err := s.Charge(ctx, ws.ID, month, allowance, chars, enforce)
		return c, err
	}
	daily := func() int64 {
		t.Helper()
		days, err := s.DailyUsage(ctx, ws.ID, "2000-01-01", "2999-12-31")
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, d := range days {
			if d.Date != today && d.Date != control.Day(time.Now()) {
				t.Fatalf("day %q, want today", d.Date)
			}
			sum += d.Characters
		}
		return sum
	}
	c, err := charge(100, 40, true) // the allowance covers it
	if err != nil || c.Day == "" {
		t.Fatalf("charge %+v %v", c, err)
	}
	if got := daily(); got != 40 {
		t.Fatalf("daily %d after a covered charge, want 40", got)
	}
	if _, err := s.UpdateWorkspace(ctx, ws.ID, control.WorkspaceUpdate{Credits: ptr(int64(30))}); err != nil {
		t.Fatal(err)
	}
	c2, err := charge(100, 80, true) // 60 from the allowance, 20 from credits
	if err != nil || c2.FromAllowance != 60 || c2.FromCredits != 20 {
		t.Fatalf("charge %+v %v", c2, err)
	}
	if got := daily(); got != 120 {
		t.Fatalf("daily %d after allowance and credits, want 120", got)
	}
	_, err = charge(100, 50, true) // 10 credits left: refused whole
	wantCode(t, err, control.EInsufficientCredits)
	if got := daily(); got != 120 {
		t.Fatalf("daily %d after a refusal, want 120", got)
	}
	if err := s.Refund(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if got := daily(); got != 40 {
		t.Fatalf("daily %d after a refund, want 40", got)
	}
	// The range is inclusive and other days are left out.
	if days, err := s.DailyUsage(ctx, ws.ID, "2000-01-01", "2000-01-02"); err != nil || len(days) != 0 {
		t.Fatalf("other days %v %v", days, err)
	}
	if days, err := s.DailyUsage(ctx, ws.ID, c.Day, c.Day); err != nil || len(days) != 1 || days[0].Characters != 40 {
		t.Fatalf("the charge's day %v %v", days, err)
	}
}
