package postgres_test

import (
	"context"
	"testing"
	"time"

	"voicesvc/control"
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

// Issue 26 item 5: with concurrency 2, two streams running, the store down
// for 3 s while both streams ended, new streams got 429 concurrency_limited
// for 12 s with nothing running: a release that failed was never retried.
// Releases are retried until they land, so within a second of the store's
// return the slots are free, for this server and for any other.
func TestLimiterReleaseAfterOutage(t *testing.T) {
	t.Run("cut", func(t *testing.T) {
		testReleaseAfterOutage(t, (*tcpProxy).Cut, (*tcpProxy).Restore)
	})
	t.Run("hung", func(t *testing.T) {
		testReleaseAfterOutage(t, (*tcpProxy).Pause, (*tcpProxy).Resume)
	})
}

func testReleaseAfterOutage(t *testing.T, down, up func(*tcpProxy)) {
	const timeout = time.Second
	schema := MustSchemaDSN(t)
	proxy, dsn := newProxy(t, schema)
	a := mustOpenVia(t, dsn, timeout).LimiterWith("server-a", postgres.LimiterOptions{})
	b := mustOpenVia(t, schema, timeout).LimiterWith("server-b", postgres.LimiterOptions{})
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := t.Context()
	ws := control.NewID()
	var leases []control.Lease
	for range 2 {
		l, _, err := a.Acquire(ctx, ws, control.SlotStream, 2)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if _, _, err := b.Acquire(ctx, ws, control.SlotStream, 2); !control.IsCode(err, control.EConcurrencyLimited) {
		t.Fatalf("third slot: %v, want concurrency_limited", err)
	}

	down(proxy)
	for _, l := range leases {
		l.Release() // both streams end while the store is down
	}
	// The outage: a's releases cannot land, and a's own calls fail as the
	// store unavailable, not as a limit.
	time.Sleep(500 * time.Millisecond)
	if _, _, err := a.Acquire(ctx, ws, control.SlotStream, 2); !control.IsCode(err, control.EStoreUnavailable) {
		t.Errorf("acquire with the store down: %v, want store_unavailable", err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, _, err := b.Acquire(ctx, ws, control.SlotStream, 2); !control.IsCode(err, control.EConcurrencyLimited) {
		t.Fatalf("the releases landed during the outage? %v", err)
	}

	up(proxy)
	back := time.Now()
	// Another server sees the slots free within a second: nothing of a's
	// request path runs here, only its background retry.
	for {
		_, _, err := b.Acquire(ctx, ws, control.SlotStream, 2)
		if err == nil {
			break
		}
		if !control.IsCode(err, control.EConcurrencyLimited) {
			t.Fatalf("acquire after the outage: %v", err)
		}
		if time.Since(back) > time.Second {
			t.Fatalf("slots still taken %v after the store came back: a failed release was not retried", time.Since(back).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And this server: b holds one slot, the other is a's to take.
	if _, _, err := a.Acquire(ctx, ws, control.SlotStream, 2); err != nil {
		t.Fatalf("acquire on a after the outage: %v", err)
	}
}
