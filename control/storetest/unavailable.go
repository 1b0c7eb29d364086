package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
)

// Hang is how a store's test makes its database stop answering: Unavailable
// calls Hold after its fixture is written and Release when it is done.
type Hang struct {
	Hold, Release func()
	// ReadsAnswer: reads may still succeed while held (SQLite in WAL mode
	// reads past another process's exclusive write lock); writes never.
	ReadsAnswer bool
}

// Unavailable checks issue 26 item 4: with the database hung (a Postgres
// that stops answering, a SQLite file another process holds under BEGIN
// EXCLUSIVE) every public store method of the request path returns
// store_unavailable (503 with Retry-After, never 500) within timeout, the
// store's call deadline, plus a margin; none returns any other error.
// The calls run at once, as requests would.
func Unavailable(t *testing.T, s control.Store, timeout time.Duration, h Hang) {
	ctx := t.Context()
	now := control.NowMS()
	month := control.Month(time.Now())
	ws := mustWorkspace(t, s, "free")
	k := mustKey(t, s, ws.ID)
	tok := &control.AccessToken{Hash: hash("tok"), WorkspaceID: ws.ID, KeyID: k.ID, ExpiresAt: now + 60_000}
	if err := s.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	v := mustVoice(t, s, newVoice(ws.ID, "mine"))
	pub := newVoice(ws.ID, "public")
	pub.Alias, pub.Visibility, pub.Status = "pub-"+control.NewID(), "public", control.VoiceReady
	mustVoice(t, s, pub)
	if _, err := s.SetVoiceAliases(ctx, ws.ID, v.ID, []string{"fixture-alias"}); err != nil {
		t.Fatal(err)
	}
	_, job := enroll(t, s, ws.ID)
	charge, _, err := s.Charge(ctx, ws.ID, month, 1000, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.BeginIdempotent(ctx, ws.ID, "idem", "fp", now); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateLoginLink(ctx, &control.LoginLink{Hash: hash("link"), WorkspaceID: ws.ID, ExpiresAt: now + 60_000}); err != nil {
		t.Fatal(err)
	}
	sess := &control.DashboardSession{Hash: hash("session")}
	if err := s.RedeemLoginLink(ctx, hash("link"), now, sess); err != nil {
		t.Fatal(err)
	}
	day := control.Day(time.Now())

	type call struct {
		name  string
		write bool
		fn    func(ctx context.Context) error
	}
	r := func(name string, fn func(ctx context.Context) error) call { return call{name, false, fn} }
	w := func(name string, fn func(ctx context.Context) error) call { return call{name, true, fn} }
	calls := []call{
		r("Ping", func(ctx context.Context) error { return s.Ping(ctx) }),
		w("CreateWorkspace", func(ctx context.Context) error {
			return s.CreateWorkspace(ctx, &control.Workspace{Name: "new", Plan: "free"})
		}),
		r("GetWorkspace", func(ctx context.Context) error { _, err := s.GetWorkspace(ctx, ws.ID); return err }),
		w("UpdateWorkspace", func(ctx context.Context) error {
			_, err := s.UpdateWorkspace(ctx, ws.ID, control.WorkspaceUpdate{Plan: ptr("pro")})
			return err
		}),
		w("CreateAPIKey", func(ctx context.Context) error {
			return s.CreateAPIKey(ctx, &control.APIKey{WorkspaceID: ws.ID, Hash: hash("k2"), Scopes: control.AllScopes})
		}),
		r("GetAPIKeyByHash", func(ctx context.Context) error { _, err := s.GetAPIKeyByHash(ctx, k.Hash); return err }),
		r("GetAPIKey", func(ctx context.Context) error { _, err := s.GetAPIKey(ctx, k.ID); return err }),
		w("RevokeAPIKey", func(ctx context.Context) error { _, err := s.RevokeAPIKey(ctx, k.ID, now); return err }),
		w("CreateToken", func(ctx context.Context) error {
			return s.CreateToken(ctx, &control.AccessToken{Hash: hash("tok2"), WorkspaceID: ws.ID, KeyID: k.ID, ExpiresAt: now + 60_000})
		}),
		r("GetTokenByHash", func(ctx context.Context) error { _, err := s.GetTokenByHash(ctx, tok.Hash); return err }),
		w("ConsumeToken", func(ctx context.Context) error { return s.ConsumeToken(ctx, tok.Hash, now) }),
		w("CreateVoice", func(ctx context.Context) error { return s.CreateVoice(ctx, newVoice(ws.ID, "new")) }),
		r("GetVoice", func(ctx context.Context) error { _, err := s.GetVoice(ctx, v.ID); return err }),
		r("GetVoiceByAlias", func(ctx context.Context) error { _, err := s.GetVoiceByAlias(ctx, pub.Alias); return err }),
		r("ListVoices", func(ctx context.Context) error {
			_, _, err := s.ListVoices(ctx, control.VoiceFilter{WorkspaceID: ws.ID})
			return err
		}),
		w("UpdateVoice", func(ctx context.Context) error {
			_, err := s.UpdateVoice(ctx, ws.ID, v.ID, control.VoiceUpdate{Name: ptr("renamed")})
			return err
		}),
		w("DeleteVoice", func(ctx context.Context) error { return s.DeleteVoice(ctx, ws.ID, pub.ID) }),
		w("SetVoiceAliases", func(ctx context.Context) error {
			_, err := s.SetVoiceAliases(ctx, ws.ID, v.ID, []string{"fixture-alias", "another"})
			return err
		}),
		r("ListVoiceAliases", func(ctx context.Context) error { _, err := s.ListVoiceAliases(ctx, ws.ID, v.ID); return err }),
		r("ResolveVoiceAlias", func(ctx context.Context) error {
			_, err := s.ResolveVoiceAlias(ctx, ws.ID, "fixture-alias")
			return err
		}),
		r("WorkspaceAliases", func(ctx context.Context) error { _, err := s.WorkspaceAliases(ctx, ws.ID); return err }),
		w("StartEnrollment", func(ctx context.Context) error {
			nv := newVoice(ws.ID, "cloned")
			nv.ConsentAt, nv.ConsentKeyID = 42, k.ID
			return s.StartEnrollment(ctx, nv, true, &control.Job{}, &control.Clip{Data: []byte("RIFF"), Filename: "a.wav", Language: "en"})
		}),
		r("GetJob", func(ctx context.Context) error { _, err := s.GetJob(ctx, job.ID); return err }),
		w("ClaimJob", func(ctx context.Context) error { _, _, err := s.ClaimJob(ctx, "worker", lease); return err }),
		w("ReportProgress", func(ctx context.Context) error { return s.ReportProgress(ctx, job.ID, "worker", 50, lease) }),
		w("SucceedJob", func(ctx context.Context) error { return s.SucceedJob(ctx, job.ID, "worker", []byte("p"), "") }),
		w("FailJob", func(ctx context.Context) error {
			return s.FailJob(ctx, job.ID, "worker", control.JobError{Code: "x", Message: "y"})
		}),
		w("ExpireJobs", func(ctx context.Context) error { _, err := s.ExpireJobs(ctx, now+time.Hour.Milliseconds()); return err }),
		w("Charge", func(ctx context.Context) error { _, _, err := s.Charge(ctx, ws.ID, month, 1000, 5, true); return err }),
		w("Refund", func(ctx context.Context) error { return s.Refund(ctx, charge) }),
		// Charges at once, as concurrent requests make them: none waits
		// for another's turn past its own deadline.
		w("Charge 2", func(ctx context.Context) error { _, _, err := s.Charge(ctx, ws.ID, month, 1000, 1, true); return err }),
		w("Charge 3", func(ctx context.Context) error { _, _, err := s.Charge(ctx, ws.ID, month, 1000, 1, true); return err }),
		w("Charge 4", func(ctx context.Context) error { _, _, err := s.Charge(ctx, ws.ID, month, 1000, 1, true); return err }),
		r("Balance", func(ctx context.Context) error { _, err := s.Balance(ctx, ws.ID, month, 1000); return err }),
		w("BeginIdempotent", func(ctx context.Context) error {
			_, err := s.BeginIdempotent(ctx, ws.ID, "idem2", "fp", now)
			return err
		}),
		w("FinishIdempotent", func(ctx context.Context) error {
			return s.FinishIdempotent(ctx, ws.ID, "idem", &control.IdempotentResponse{Status: 200})
		}),
		w("AbandonIdempotent", func(ctx context.Context) error { return s.AbandonIdempotent(ctx, ws.ID, "idem") }),
		w("CreateLoginLink", func(ctx context.Context) error {
			return s.CreateLoginLink(ctx, &control.LoginLink{Hash: hash("link2"), WorkspaceID: ws.ID, ExpiresAt: now + 60_000})
		}),
		w("RedeemLoginLink", func(ctx context.Context) error {
			return s.RedeemLoginLink(ctx, hash("link"), now, &control.DashboardSession{Hash: hash("s2")})
		}),
		r("GetDashboardSession", func(ctx context.Context) error {
			_, err := s.GetDashboardSession(ctx, hash("session"), now)
			return err
		}),
		w("DeleteDashboardSession", func(ctx context.Context) error { return s.DeleteDashboardSession(ctx, hash("session")) }),
		r("ListAPIKeys", func(ctx context.Context) error { _, err := s.ListAPIKeys(ctx, ws.ID); return err }),
		r("DailyUsage", func(ctx context.Context) error { _, err := s.DailyUsage(ctx, ws.ID, day, day); return err }),
	}

	h.Hold()
	released := false
	release := func() {
		if !released {
			released = true
			h.Release()
		}
	}
	defer release()
	// The gateway's own bound on a handler's store call is 10 s; a margin
	// of a second and a half over the store's deadline is what a client of
	// a hung store may wait.
	limit := timeout + 1500*time.Millisecond
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			start := time.Now()
			err := c.fn(cctx)
			took := time.Since(start)
			switch {
			case took > limit:
				t.Errorf("%s took %v with the store hung; want store_unavailable within %v", c.name, took.Round(time.Millisecond), limit)
			case err == nil && (c.write || !h.ReadsAnswer):
				t.Errorf("%s succeeded with the store hung", c.name)
			case err != nil && !control.IsCode(err, control.EStoreUnavailable):
				t.Errorf("%s with the store hung: %v (code %s), want store_unavailable", c.name, err, control.ErrorCode(err))
			case err != nil && control.AsError(err).RetryAfter < 1:
				t.Errorf("%s: store_unavailable without Retry-After", c.name)
			}
		}()
	}
	wg.Wait()
	release()

	// Service comes back by itself once the database answers again.
	deadline := time.Now().Add(timeout + 5*time.Second)
	for {
		_, err := s.GetWorkspace(ctx, ws.ID)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := s.Charge(ctx, ws.ID, month, 1000, 1, true); err != nil {
		t.Fatalf("a write after the store came back: %v", err)
	}
}
