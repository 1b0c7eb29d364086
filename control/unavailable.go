package control

import (
	"errors"
	"net"
	"strings"
	"syscall"
)

// ErrStoreUnavailable is what a client sees when the store cannot be
// reached: 503 with Retry-After 1, never a 500, so that clients and load
// balancers retry instead of giving up.
var ErrStoreUnavailable = &Error{Code: EStoreUnavailable,
	Message: "the data store is unreachable; retry shortly", RetryAfter: 1}

// StoreUnavailable reports whether err means the store could not be reached,
// as opposed to a query that failed. It is the one place store errors are
// classified, so that no store method has to wrap its errors:
//
//   - a network operation that failed (dial refused, reset, broken pipe,
//     unknown host): the Postgres driver's connect and pool-acquire failures
//     wrap the *net.OpError of the dial;
//   - the syscall errors of a lost connection, wherever they are wrapped;
//   - a Postgres SQLSTATE of class 08 (connection exception), 53
//     (insufficient resources: disk full, out of memory, too many
//     connections) or 57P01-57P03 (the server is shutting down, crashed, or
//     not yet accepting), read through the SQLState method of the driver's
//     error so that control does not import the driver;
//   - a full disk under the store: ENOSPC, or SQLite's SQLITE_FULL (13) and
//     SQLITE_IOERR (10, the write failed), read through the Code method of
//     the SQLite driver's error. Space may come back (logs rotated, a
//     volume grown); until then the store cannot take writes, which is not
//     the request's fault.
//
// context.Canceled and DeadlineExceeded alone are not: they implement
// net.Error too, which is why only *net.OpError is matched.
func StoreUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code == EStoreUnavailable
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
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		code := st.SQLState()
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") ||
			code == "57P01" || code == "57P02" || code == "57P03"
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		switch lite.Code() & 0xff { // the primary result code of an extended one
		case sqliteIOErr, sqliteFull:
			return true
		}
	}
	return false
}

// SQLite result codes (sqlite.org/rescode.html).
const (
	sqliteIOErr = 10
	sqliteFull  = 13
)

var lostConnection = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ETIMEDOUT, syscall.ENOSPC,
}
