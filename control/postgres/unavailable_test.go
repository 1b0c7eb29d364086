package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"voicesvc/control"
)

// The errors of pgx that mean the server cannot be reached (moved here from
// control, which no longer knows driver codes).
func TestUnavailable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	state := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code} }
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"dial refused", dial, true},
		{"wrapped dial (pgconn.ConnectError)", fmt.Errorf("failed to connect to `host=x`: %w", dial), true},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), true},
		{"dns", &net.DNSError{Err: "no such host", Name: "db"}, true},
		{"admin shutdown 57P01", fmt.Errorf("query: %w", state("57P01")), true},
		{"crash shutdown 57P02", state("57P02"), true},
		{"starting up 57P03", state("57P03"), true},
		{"connection failure 08006", state("08006"), true},
		{"too many connections 53300", state("53300"), true},
		{"disk full 53100", state("53100"), true},
		{"unique violation 23505", state("23505"), false},
		{"query canceled 57014", state("57014"), false},
		{"no space", fmt.Errorf("write: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), true},
		{"deadline", fmt.Errorf("count voices: %w", context.DeadlineExceeded), true},
		{"i/o timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{"canceled", fmt.Errorf("q: %w", context.Canceled), false},
		{"unexpected eof", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"conn closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), true},
		{"connect without an answer", &pgconn.ConnectError{Config: &pgconn.Config{}}, true},
		{"plain", errors.New("boom"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := unavailable(c.err); got != c.want {
				t.Errorf("unavailable(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// classify keeps domain errors and failing queries, turns the rest into
// store_unavailable, and treats any error past the deadline as one.
func TestClassify(t *testing.T) {
	ctx := context.Background()
	// The classification a store call's end applies (control.BoundCall).
	classify := func(ctx context.Context, err error) error {
		_, end := control.BoundCall(ctx, time.Hour, unavailable)
		end(&err)
		return err
	}
	nf := control.Errorf(control.ENotFound, "x")
	if got := classify(ctx, nf); got != nf {
		t.Errorf("a domain error became %v", got)
	}
	if got := classify(ctx, errors.New("boom")); control.StoreUnavailable(got) {
		t.Errorf("a failing query became %v", got)
	}
	got := classify(ctx, fmt.Errorf("x: %w", syscall.ECONNRESET))
	if !control.IsCode(got, control.EStoreUnavailable) || !errors.Is(got, syscall.ECONNRESET) {
		t.Errorf("a reset connection became %v", got)
	}
	dctx, cancel := context.WithTimeout(ctx, time.Nanosecond)
	defer cancel()
	<-dctx.Done()
	if got := classify(dctx, errors.New("conn closed")); !control.StoreUnavailable(got) {
		t.Errorf("an error past the deadline became %v", got)
	}
}

// The errors the real driver gives when the server cannot be reached are
// classified (the gateway answers them 503 store_unavailable): a refused
// connect at Open, and a connection the server terminates (57P01, as at a
// fast shutdown).
func TestUnavailableDriverErrors(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now: connection refused
	_, err = Open(ctx, "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=5")
	if !control.IsCode(err, control.EStoreUnavailable) {
		t.Errorf("refused connect: %v: not store_unavailable", err)
	}

	pool, err := pgxpool.New(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
	if err == nil || !unavailable(err) {
		t.Errorf("terminated connection: %v: not classified as the store unavailable", err)
	}
	_, err = pool.Exec(ctx, "SELECT 1/0")
	if err == nil || unavailable(err) {
		t.Errorf("a failing query (%v) is classified as the store unavailable", err)
	}
}

func testDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv("VOICESVC_TEST_PG")
	if dsn == "" {
		tb.Skip("VOICESVC_TEST_PG is unset")
	}
	return dsn
}
