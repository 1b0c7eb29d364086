package postgres_test

import (
	"context"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/control/storetest"
)

// testDSN returns VOICESVC_TEST_PG, skipping the test when it is unset, or
// failing it in CI, where the Postgres run is required.
func testDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("VOICESVC_TEST_PG")
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			tb.Fatal("VOICESVC_TEST_PG is unset but CI=true: the Postgres store tests are required in CI")
		}
		tb.Skip("VOICESVC_TEST_PG is unset; set it (e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable) to run the Postgres store tests")
	}
	return dsn
}

// MustSchemaDSN creates a fresh schema for tb, dropped at cleanup, and
// returns a DSN whose sessions use it, so that tests never see each other's
// rows.
func MustSchemaDSN(tb testing.TB) string {
	tb.Helper()
	dsn := testDSN(tb)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		tb.Fatalf("connect to VOICESVC_TEST_PG: %v", err)
	}
	defer conn.Close(ctx)
	schema := "t_" + control.NewID()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			tb.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Error(err)
		}
	})
	return withSearchPath(tb, dsn, schema)
}

func withSearchPath(tb testing.TB, dsn, schema string) string {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return dsn + " search_path=" + schema
	}
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// MustOpenDB opens a store on dsn, closed at cleanup.
func MustOpenDB(tb testing.TB, dsn string) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestStore(t *testing.T) {
	testDSN(t)
	storetest.Run(t, func(t *testing.T) control.Store { return MustOpenDB(t, MustSchemaDSN(t)) })
}

// TestTwoServers: two stores on one schema behave like two servers: both
// migrate once, a revoke on one reaches the other's feed, a token used on
// both is consumed once, and queued jobs are claimed once.
func TestTwoServers(t *testing.T) {
	dsn := MustSchemaDSN(t)
	opened := make(chan *postgres.DB, 2)
	for range 2 {
		go func() {
			db, err := postgres.Open(context.Background(), dsn)
			if err != nil {
				t.Error(err)
			}
			opened <- db
		}()
	}
	a, b := <-opened, <-opened
	if a == nil || b == nil {
		t.FailNow()
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := t.Context()

	ws := &control.Workspace{Name: "w"}
	if err := a.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	k := &control.APIKey{WorkspaceID: ws.ID, Hash: []byte("h"), Scopes: control.AllScopes}
	if err := a.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	storetest.WatchWithin(t, b, "key", k.ID, func() {
		if _, err := a.RevokeAPIKey(ctx, k.ID, control.NowMS()); err != nil {
			t.Fatal(err)
		}
	})

	now := control.NowMS()
	if err := a.CreateToken(ctx, &control.AccessToken{Hash: []byte("t"), WorkspaceID: ws.ID, KeyID: k.ID, ExpiresAt: now + 60_000}); err != nil {
		t.Fatal(err)
	}
	var ok atomic.Int32
	done := make(chan struct{})
	for i := range 50 {
		go func() {
			s := a
			if i%2 == 1 {
				s = b
			}
			if s.ConsumeToken(ctx, []byte("t"), now) == nil {
				ok.Add(1)
			}
			done <- struct{}{}
		}()
	}
	for range 50 {
		<-done
	}
	if ok.Load() != 1 {
		t.Fatalf("%d of 50 uses over two servers succeeded, want 1", ok.Load())
	}
}

// TestWatchReconnect: a listener whose connection is killed reconnects and
// still delivers changes (from the NOTIFY or the catch-up query).
func TestWatchReconnect(t *testing.T) {
	dsn := MustSchemaDSN(t)
	db := MustOpenDB(t, dsn)
	ctx := t.Context()
	ws := &control.Workspace{Name: "w"}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan string, 16)
	go db.WatchChanges(wctx, func(c control.Change) { got <- c.Kind + " " + c.ID })
	time.Sleep(300 * time.Millisecond)
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var killed int
	if err := conn.QueryRow(ctx, `SELECT COUNT(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1`, "voicesvc_changes_"+schemaOf(t, dsn)).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("killed %d listeners: %v", killed, err)
	}
	if _, err := db.UpdateWorkspace(ctx, ws.ID, control.WorkspaceUpdate{Plan: ptr("pro")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(5 * time.Second)
	for {
		select {
		case c := <-got:
			if c == "workspace "+ws.ID {
				return
			}
		case <-deadline:
			t.Fatal("change not delivered after the listener's connection was killed")
		}
	}
}

func schemaOf(t *testing.T, dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("search_path")
}

func ptr[T any](v T) *T { return &v }
