package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"voicesvc/control"
)

// call bounds one store call by the store timeout and returns the function
// its deferred end runs: it turns an error that means the database could
// not be reached in time into control's store_unavailable (503, Retry-After
// 1) and releases the deadline. Every public method of DB and Limiter
// starts with
//
//	ctx, end := db.call(ctx)
//	defer end(&err)
func (db *DB) call(ctx context.Context) (context.Context, func(*error)) {
	return db.callWithin(ctx, db.timeout)
}

// seedTimeout bounds SeedCatalog, which runs at start and writes the whole
// catalog in one transaction: longer than a request's call may take.
const seedTimeout = time.Minute

// callWithin is call with the deadline d.
func (db *DB) callWithin(ctx context.Context, d time.Duration) (context.Context, func(*error)) {
	return control.BoundCall(ctx, d, unavailable)
}

// unavailable reports whether err, from pgx, means the database could not
// be reached, as opposed to a query that failed:
//
//   - a deadline exceeded, the store timeout's or the caller's, or the I/O
//     timeout pgx sets on the connection when it expires: a server that
//     hangs (stopped, partitioned, overloaded) answers like one that is gone;
//   - a network operation that failed (dial refused, reset, broken pipe,
//     unknown host): the connect and pool-acquire failures wrap the
//     *net.OpError of the dial;
//   - the syscall errors of a lost connection, wherever they are wrapped,
//     and the driver's own: a connect that failed without a server's answer,
//     a connection closed under a transaction, an EOF where a message was
//     due (the server or the network went away mid-query);
//   - a SQLSTATE of class 08 (connection exception), 53 (insufficient
//     resources: disk full, out of memory, too many connections) or
//     57P01-57P03 (the server is shutting down, crashed, or not yet
//     accepting);
//   - a full disk under the client (ENOSPC).
//
// context.Canceled is not: the caller went away, the database did not.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return true
	}
	var op *net.OpError
	var dns *net.DNSError
	if errors.As(err, &op) || errors.As(err, &dns) {
		return true
	}
	for _, errno := range lostConnection {
		if errors.Is(err, errno) {
			return true
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// A server that answers: only these states say it cannot serve (a
		// failed login or a missing database is a configuration error).
		return unavailableState(pe.Code)
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// unavailableState reports whether a SQLSTATE means the server cannot serve.
func unavailableState(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") ||
		code == "57P01" || code == "57P02" || code == "57P03"
}

var lostConnection = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ETIMEDOUT, syscall.ENOSPC,
}

// DefaultTimeout bounds every store call unless Options say otherwise.
const DefaultTimeout = 5 * time.Second
