package control

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// sqlStateErr stands in for the Postgres driver's *pgconn.PgError.
type sqlStateErr string

func (e sqlStateErr) Error() string    { return "server error " + string(e) }
func (e sqlStateErr) SQLState() string { return string(e) }

// sqliteErr stands in for the SQLite driver's *sqlite.Error.
type sqliteErr int

func (e sqliteErr) Error() string { return fmt.Sprintf("sqlite error %d", int(e)) }
func (e sqliteErr) Code() int     { return int(e) }

func TestStoreUnavailable(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
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
		{"admin shutdown 57P01", fmt.Errorf("query: %w", sqlStateErr("57P01")), true},
		{"starting up 57P03", sqlStateErr("57P03"), true},
		{"connection failure 08006", sqlStateErr("08006"), true},
		{"unique violation 23505", sqlStateErr("23505"), false},
		{"postgres disk full 53100", sqlStateErr("53100"), true},
		{"sqlite full", fmt.Errorf("exec: %w", sqliteErr(13)), true},
		{"sqlite ioerr write (extended)", sqliteErr(10 | 3<<8), true},
		{"sqlite constraint", sqliteErr(19), false},
		{"sqlite busy", sqliteErr(5), false},
		{"no space", fmt.Errorf("write media: %w", &os.PathError{Op: "write", Path: "x", Err: syscall.ENOSPC}), true},
		{"store_unavailable error", ErrStoreUnavailable, true},
		{"other *Error", Errorf(ENotFound, "x"), false},
		{"deadline", context.DeadlineExceeded, false},
		{"canceled", fmt.Errorf("q: %w", context.Canceled), false},
		{"eof", io.ErrUnexpectedEOF, false},
		{"plain", errors.New("boom"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := StoreUnavailable(c.err); got != c.want {
				t.Errorf("StoreUnavailable(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

// An unreachable store answers 503 store_unavailable with Retry-After 1
// wherever an error becomes a response.
func TestStoreUnavailableMapping(t *testing.T) {
	err := fmt.Errorf("list voices: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED})
	if c := ErrorCode(err); c != EStoreUnavailable {
		t.Errorf("ErrorCode = %q", c)
	}
	e := AsError(err)
	if e.Code != EStoreUnavailable || e.RetryAfter != 1 {
		t.Errorf("AsError = %+v", e)
	}
}
