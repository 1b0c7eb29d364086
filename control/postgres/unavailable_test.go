package postgres_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"voicesvc/control"
	"voicesvc/control/postgres"
)

// The errors the real driver gives when the server cannot be reached are
// the ones control.StoreUnavailable recognizes (the gateway answers them
// 503 store_unavailable): a refused connect through the pool, and a
// connection the server terminates (57P01, as at a fast shutdown).
func TestStoreUnavailableDriverErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now: connection refused
	_, err = postgres.Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=5")
	if err == nil || !control.StoreUnavailable(err) {
		t.Errorf("refused connect: %v: not classified as the store unavailable", err)
	}

	pool, err := pgxpool.New(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
	if err == nil || !control.StoreUnavailable(err) {
		t.Errorf("terminated connection: %v: not classified as the store unavailable", err)
	}
	_, err = pool.Exec(ctx, "SELECT 1/0")
	if err == nil || control.StoreUnavailable(err) {
		t.Errorf("a failing query (%v) is classified as the store unavailable", err)
	}
}
