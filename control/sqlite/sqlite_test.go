package sqlite_test

import (
	"path/filepath"
	"testing"

	"voicesvc/control"
	"voicesvc/control/sqlite"
	"voicesvc/control/storetest"
)

// MustOpenDB opens a store on a new file in t's temp dir, closed at cleanup.
func MustOpenDB(tb testing.TB) *sqlite.DB {
	tb.Helper()
	return mustOpenPath(tb, filepath.Join(tb.TempDir(), "data", "voicesvc.db"))
}

func mustOpenPath(tb testing.TB, path string) *sqlite.DB {
	tb.Helper()
	db, err := sqlite.Open(tb.Context(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Error(err)
		}
	})
	return db
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) control.Store { return MustOpenDB(t) })
}

// TestTwoHandles: a second handle on the same file (as the admin CLI opens
// it while the server runs) re-runs no migration, and its changes reach the
// first handle's feed.
func TestTwoHandles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	server := mustOpenPath(t, path)
	admin := mustOpenPath(t, path)
	ctx := t.Context()
	ws := &control.Workspace{Name: "w"}
	if err := admin.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	k := &control.APIKey{WorkspaceID: ws.ID, Hash: []byte("h"), Scopes: control.AllScopes}
	if err := server.CreateAPIKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	storetest.WatchWithin(t, server, "key", k.ID, func() {
		if _, err := admin.RevokeAPIKey(ctx, k.ID, control.NowMS()); err != nil {
			t.Fatal(err)
		}
	})
	if got, err := server.GetAPIKeyByHash(ctx, []byte("h")); err != nil || got.RevokedAt == 0 {
		t.Fatalf("server sees %+v %v", got, err)
	}
}

// TestConcurrentOpen: processes starting together on a new file migrate it
// once and all open.
func TestConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			db, err := sqlite.Open(t.Context(), path)
			if err == nil {
				err = db.Ping(t.Context())
				db.Close()
			}
			errs <- err
		}()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
