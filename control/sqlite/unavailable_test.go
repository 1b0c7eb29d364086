package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/control/sqlite"
	"voicesvc/control/storetest"
)

// holdExclusive returns the Hang of another process holding the file under
// BEGIN EXCLUSIVE (the admin CLI, `sqlite3`, a backup): a second *sql.DB of
// its own on the same file, whose connection keeps the lock until Release.
func holdExclusive(t *testing.T, path string) storetest.Hang {
	other, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	var conn *sql.Conn
	return storetest.Hang{
		ReadsAnswer: true, // WAL: readers do not wait for the writer
		Hold: func() {
			var err error
			if conn, err = other.Conn(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
				t.Fatal(err)
			}
		},
		Release: func() {
			if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
				t.Error(err)
			}
			conn.Close()
		},
	}
}

// Issue 26 item 4: SQLite held under BEGIN EXCLUSIVE by another process
// answered 500 (SQLITE_BUSY). Every call now ends within the store timeout
// as store_unavailable, or succeeds (reads).
func TestUnavailableLocked(t *testing.T) {
	const timeout = time.Second
	path := filepath.Join(t.TempDir(), "locked.db")
	db, err := sqlite.OpenWith(t.Context(), path, sqlite.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	storetest.Unavailable(t, db, timeout, holdExclusive(t, path))
}

// A statement that fails is not the store unavailable; SQLITE_BUSY is, and
// keeps the driver's error as its cause.
func TestUnavailableClassification(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.db")
	db, err := sqlite.OpenWith(t.Context(), path, sqlite.Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ctx := t.Context()
	ws := &control.Workspace{Name: "w"}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	// A duplicate id is a constraint violation: internal, not unavailable.
	if err := db.CreateWorkspace(ctx, &control.Workspace{ID: ws.ID, Name: "w"}); err == nil || control.StoreUnavailable(err) {
		t.Errorf("a constraint violation became %v", err)
	}
	h := holdExclusive(t, path)
	h.Hold()
	err = db.CreateWorkspace(ctx, &control.Workspace{Name: "x"})
	h.Release()
	var ce *control.Error
	if !errors.As(err, &ce) || ce.Code != control.EStoreUnavailable || ce.RetryAfter != 1 || ce.Cause == nil {
		t.Errorf("a locked file: %v, want store_unavailable with its cause", err)
	}
	// A caller that went away is not the store unavailable.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := db.GetWorkspace(cctx, ws.ID); err == nil || control.StoreUnavailable(err) {
		t.Errorf("a canceled call became %v", err)
	}
}
