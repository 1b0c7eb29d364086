package postgres_test

import (
	"context"
	"testing"
	"time"

	"voicesvc/control/postgres"
	"voicesvc/control/storetest"
)

// mustOpenVia opens a store on dsn with the given call timeout.
func mustOpenVia(t *testing.T, dsn string, timeout time.Duration) *postgres.DB {
	t.Helper()
	db, err := postgres.OpenWith(context.Background(), dsn, postgres.Options{Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Issue 26 item 4: Postgres stopped (SIGSTOP) answered 500 "context deadline
// exceeded" (count voices, acquire slot). A server that stops answering, here
// a proxy that stops forwarding, gives store_unavailable within the store
// timeout on every call, and service resumes by itself.
func TestUnavailableHung(t *testing.T) {
	const timeout = time.Second
	proxy, dsn := newProxy(t, MustSchemaDSN(t))
	db := mustOpenVia(t, dsn, timeout)
	storetest.Unavailable(t, db, timeout, storetest.Hang{Hold: proxy.Pause, Release: proxy.Resume})
}

// The same with the connections reset and new ones refused (a crash, a
// restart, a network cut).
func TestUnavailableCut(t *testing.T) {
	const timeout = time.Second
	proxy, dsn := newProxy(t, MustSchemaDSN(t))
	db := mustOpenVia(t, dsn, timeout)
	storetest.Unavailable(t, db, timeout, storetest.Hang{Hold: proxy.Cut, Release: proxy.Restore})
}
