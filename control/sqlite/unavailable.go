package sqlite

import (
	"context"
	"errors"
	"syscall"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"voicesvc/control"
)

// call bounds one store call by the store timeout and returns the function
// its deferred end runs: it turns an error that means the database could
// not be used in time into control's store_unavailable (503, Retry-After 1)
// and releases the deadline. Every public method of DB starts with
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

// unavailable reports whether err, from modernc.org/sqlite, means the
// database could not be used, as opposed to a statement that failed:
//
//   - a deadline exceeded, the store timeout's or the caller's;
//   - SQLITE_BUSY (5) or SQLITE_LOCKED (6), any extended code: another
//     process (the admin CLI, a backup, `sqlite3` with BEGIN EXCLUSIVE)
//     holds the file past busy_timeout;
//   - a full disk: SQLITE_FULL (13), SQLITE_IOERR (10, the write failed)
//     or ENOSPC. Space may come back (logs rotated, a volume grown); until
//     then the store cannot take writes, which is not the request's fault;
//   - SQLITE_CANTOPEN (14): the file or its directory went away or lost
//     its permissions.
//
// context.Canceled is not: the caller went away, the database did not.
func unavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ENOSPC) {
		return true
	}
	var se *sqlitedriver.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff { // the primary result code of an extended one
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_FULL,
			sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
			return true
		}
	}
	return false
}

// DefaultTimeout bounds every store call unless Options say otherwise.
const DefaultTimeout = 5 * time.Second
