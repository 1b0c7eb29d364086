package control

import "errors"

// ErrStoreUnavailable is what a client sees when the store cannot be
// reached: 503 with Retry-After 1, never a 500, so that clients and load
// balancers retry instead of giving up.
var ErrStoreUnavailable = &Error{Code: EStoreUnavailable,
	Message: "the data store is unreachable; retry shortly", RetryAfter: 1}

// StoreUnavailableError is ErrStoreUnavailable carrying the driver error
// that caused it (for logs; errors.Is and errors.As see through it). The
// store packages (control/sqlite, control/postgres) classify their drivers'
// errors and return this at their boundary, so that control knows no driver
// error code: a lost or refused connection, a deadline of the store timeout,
// a busy or locked database, a full disk.
func StoreUnavailableError(cause error) *Error {
	e := *ErrStoreUnavailable
	e.Cause = cause
	return &e
}

// StoreUnavailable reports whether err is (or wraps) the store_unavailable
// *Error a store returns when it cannot be reached.
func StoreUnavailable(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == EStoreUnavailable
}
