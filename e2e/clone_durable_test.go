package e2e

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
	"voicesvc/e2e/harness"
)

// Test-only knobs of the clone runner (cloning.FromEnv): each job waits
// mid-way, and leases are short so a dead server's job is taken up fast.
const (
	clDelayEnv = "VOICESVC_CLONE_TEST_DELAY"
	clLeaseEnv = "VOICESVC_CLONE_LEASE"
)

// A server killed (SIGKILL) while a clone runs: a server started again on
// the same store takes the job up once its lease lapses, and finishes it.
func TestCloneSurvivesKill(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "voicesvc.db")
	s1 := harness.Start(t, harness.Options{DB: db, Env: []string{clDelayEnv + "=30s", clLeaseEnv + "=2s"}})
	_, key := harness.Workspace(t, db, "pro")
	clip := clRead(t, clClip(t, "en+m3", 50, clTexts["en"], "wav"))
	vid, running := clStartClone(t, s1.API, key, "killed-running", clip)
	_, queued := clStartClone(t, s1.API, key, "killed-queued", clip)

	deadline := time.Now().Add(20 * time.Second)
	for {
		j := clDo(t, "GET", s1.API+"/jobs/"+running, key, "", nil).data()
		if j["status"] == "running" && j["progress"].(float64) >= 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job never got running: %v", j)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s1.Kill()

	s2 := harness.Start(t, harness.Options{DB: db, Env: []string{clLeaseEnv + "=2s"}})
	for _, id := range []string{running, queued} {
		if j := clWaitJob(t, s2.API, key, id, 30*time.Second); j["status"] != "succeeded" {
			t.Errorf("job %s after restart: %v", id, j)
		}
	}
	if v := clVoice(t, s2.API, key, vid); v["status"] != "ready" {
		t.Errorf("voice after restart: %v", v)
	}
	if !regexp.MustCompile(`"clone job started" job=` + running + ` .*attempt=2`).MatchString(s2.Logs()) {
		t.Errorf("the restarted server did not take the job up as its second attempt:\n%s", s2.Logs())
	}
}

// Two servers on one Postgres store: 20 queued clone jobs each run
// exactly once (SKIP LOCKED claims), counted from the runners' log lines.
func TestCloneTwoServersPostgres(t *testing.T) {
	dsn := clPGSchema(t)
	env := []string{clDelayEnv + "=150ms"} // jobs pile up, so both claim
	s1 := harness.Start(t, harness.Options{DB: dsn, Env: env})
	s2 := harness.Start(t, harness.Options{DB: dsn, Env: env})
	_, key := harness.Workspace(t, dsn, "enterprise")
	clip := clRead(t, clClip(t, "en+f5", 50, clTexts["en"], "wav"))

	var jobs []string
	for i := 0; i < 20; i++ {
		api := s1.API
		if i%2 == 1 {
			api = s2.API
		}
		_, jid := clStartClone(t, api, key, "pg", clip)
		jobs = append(jobs, jid)
	}
	for _, id := range jobs {
		if j := clWaitJob(t, s1.API, key, id, 90*time.Second); j["status"] != "succeeded" {
			t.Errorf("job %s: %v", id, j)
		}
	}
	logs := [2]string{s1.Logs(), s2.Logs()}
	ran := [2]int{}
	for _, id := range jobs {
		n := 0
		for i, l := range logs {
			c := strings.Count(l, `"clone job started" job=`+id)
			ran[i] += c
			n += c
		}
		if n != 1 {
			t.Errorf("job %s ran %d times", id, n)
		}
	}
	t.Logf("jobs run: server 1 %d, server 2 %d", ran[0], ran[1])
}

// clPGSchema returns a DSN on VOICESVC_TEST_PG whose sessions use a fresh
// schema (search_path), dropped at cleanup. Unset: skip, or fail in CI.
func clPGSchema(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("VOICESVC_TEST_PG")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("VOICESVC_TEST_PG is unset but CI=true: the two-server clone test needs Postgres")
		}
		t.Skip("VOICESVC_TEST_PG is unset; set it (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the two-server clone test")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to VOICESVC_TEST_PG: %v", err)
	}
	defer conn.Close(ctx)
	schema := "e2e_" + control.NewID()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
	})
	u, err := url.Parse(dsn)
	if err != nil || !strings.HasPrefix(dsn, "postgres") {
		t.Fatalf("VOICESVC_TEST_PG must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
