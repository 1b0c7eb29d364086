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
//   - a Postgres SQLSTATE of class 08 (connection exception) or 57P01-57P03
//     (the server is shutting down, crashed, or not yet accepting), read
//     through the SQLState method of the driver's error so that control does
//     not import the driver.
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
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
	}
	return false
}

var lostConnection = []error{
	syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
	syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ETIMEDOUT,
}
