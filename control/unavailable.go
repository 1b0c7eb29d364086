package control

import (
	"context"
	"errors"
	"time"
)

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

// BoundCall bounds one store call by d and returns the function its
// deferred end runs: it turns an error that means the database could not
// be reached in time into StoreUnavailableError (503, Retry-After 1) and
// releases the deadline. unavailable is the store's classification of its
// driver's errors; past the deadline any driver error counts as the store
// not answering in time, a domain *Error never does. A store's public
// methods start with
//
//	ctx, end := control.BoundCall(ctx, timeout, unavailable)
//	defer end(&err)
func BoundCall(ctx context.Context, d time.Duration, unavailable func(error) bool) (context.Context, func(*error)) {
	ctx, cancel := context.WithTimeout(ctx, d)
	return ctx, func(err *error) {
		if *err != nil {
			*err = classifyStoreError(ctx, *err, unavailable)
		}
		cancel()
	}
}

func classifyStoreError(ctx context.Context, err error, unavailable func(error) bool) error {
	var ce *Error
	if errors.As(err, &ce) {
		return err
	}
	if unavailable(err) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return StoreUnavailableError(err)
	}
	return err
}
