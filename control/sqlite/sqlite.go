// Package sqlite is the embedded store of voicesvc (modernc.org/sqlite, no
// server needed). One file may be shared by several processes: the server
// and the admin CLI.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"voicesvc/control"

	sqlitedriver "modernc.org/sqlite" // also registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

var _ control.Store = (*DB)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// pollInterval is how often WatchChanges looks for new rows in changes; well
// under the 2 s within which admin changes must reach a server.
const pollInterval = 250 * time.Millisecond

// DB is the SQLite store. Writes go through a pool of one connection whose
// transactions begin IMMEDIATE: inside the process writers queue in Go
// instead of failing with SQLITE_BUSY, and against other processes the
// write lock is taken up front, where busy_timeout applies, rather than on a
// read-to-write upgrade that SQLite cannot wait for. Reads use their own pool
// and, thanks to WAL, never wait for the writer.
type DB struct {
	write   *sql.DB
	read    *sql.DB
	st      stmts // the request path's statements, prepared at Open
	now     func() time.Time
	timeout time.Duration // bounds every store call (call)
	// writing is the write pool's one connection as a semaphore, taken
	// before it with the call's context: database/sql's wait for a
	// connection does not end with a context that cannot be canceled, and
	// Charge runs without cancellation (see there).
	writing chan struct{}
}

// Options tune a store; zero values take the defaults.
type Options struct {
	// Timeout bounds every store call (DefaultTimeout), and is SQLite's
	// busy_timeout: a file another process holds locked for longer fails
	// the call with store_unavailable.
	Timeout time.Duration
}

// Open opens (creating it and its directory when missing) the database file
// at path and applies pending migrations.
func Open(ctx context.Context, path string) (*DB, error) { return OpenWith(ctx, path, Options{}) }

// OpenWith is Open with options.
func OpenWith(ctx context.Context, path string, opts Options) (*DB, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if path == "" {
		return nil, errors.New("sqlite: empty path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	common := fmt.Sprintf("_busy_timeout=%d", max(opts.Timeout.Milliseconds(), 1)) + "&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)"
	write, err := sql.Open("sqlite", path+"?"+common+"&_journal_mode=WAL&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	db := &DB{write: write, now: time.Now, timeout: opts.Timeout, writing: make(chan struct{}, 1)}
	if err := db.migrateRetrying(ctx); err != nil {
		write.Close()
		return nil, err
	}
	// Opened after the migration switched the file to WAL, so readers never
	// race to change the journal mode.
	read, err := sql.Open("sqlite", path+"?"+common)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	read.SetMaxOpenConns(4)
	read.SetMaxIdleConns(4)
	db.read = read
	if err := db.prepare(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes both pools.
func (db *DB) Close() error {
	err := errors.Join(db.st.close(), db.write.Close())
	if db.read != nil {
		err = errors.Join(err, db.read.Close())
	}
	return err
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var one int
	return db.read.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// migrateRetrying runs migrate, retrying while another process holds the
// file in a state where SQLite answers SQLITE_BUSY without waiting for the
// busy timeout: switching a new file to WAL, or recovering its WAL index.
// Several processes opening one new file together (a server and the admin
// CLI) hit this; it lasts milliseconds, so a bounded retry is enough.
func (db *DB) migrateRetrying(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		err := db.migrate(ctx)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// isBusy reports whether err is SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlitedriver.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// migrate applies the embedded migrations not yet recorded, in one IMMEDIATE
// transaction so that two processes starting together apply them once.
func (db *DB) migrate(ctx context.Context) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return fmt.Errorf("sqlite: migrations table: %w", err)
		}
		names, err := fs.Glob(migrations, "migrations/*.sql")
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, name := range names {
			base := filepath.Base(name)
			version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
			if err != nil {
				return fmt.Errorf("sqlite: migration %s: bad version", base)
			}
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			body, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(body)); err != nil {
				return fmt.Errorf("sqlite: migration %s: %w", base, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
				version, time.Now().UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
}

// startWrite takes the write connection's turn, waiting no longer than
// ctx; waited reports whether another writer had it. endWrite gives it back.
func (db *DB) startWrite(ctx context.Context) (waited bool, err error) {
	select {
	case db.writing <- struct{}{}:
		return false, nil
	default:
	}
	select {
	case db.writing <- struct{}{}:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("sqlite: waiting to write: %w", ctx.Err())
	}
}

func (db *DB) endWrite() { <-db.writing }

// update runs fn in a write transaction and commits when it returns nil.
func (db *DB) update(ctx context.Context, fn func(tx *sql.Tx) error) error {
	if _, err := db.startWrite(ctx); err != nil {
		return err
	}
	defer db.endWrite()
	return db.updateTurn(ctx, fn)
}

// updateTurn is update for a caller that has the write turn.
func (db *DB) updateTurn(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	return nil
}

// view runs fn in a read transaction, for reads that must be consistent.
func (db *DB) view(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := db.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	defer tx.Rollback()
	return fn(tx)
}

func (db *DB) nowMS() int64 { return db.now().UnixMilli() }

// recordChange appends to the change feed inside the changing transaction,
// so that a change is seen exactly when it is committed.
func recordChange(ctx context.Context, tx *sql.Tx, kind, id string, now int64) error {
	res, err := tx.ExecContext(ctx, `INSERT INTO changes (kind, id, created_at) VALUES (?, ?, ?)`, kind, id, now)
	if err != nil {
		return fmt.Errorf("sqlite: record change: %w", err)
	}
	// Trim the feed now and then; servers only read recent rows.
	if seq, err := res.LastInsertId(); err == nil && seq%256 == 0 {
		_, err = tx.ExecContext(ctx, `DELETE FROM changes WHERE created_at < ?`, now-int64(time.Hour/time.Millisecond))
		if err != nil {
			return fmt.Errorf("sqlite: trim changes: %w", err)
		}
	}
	return nil
}

// WatchChanges polls the changes table and calls fn for every change made
// after the call started, until ctx ends.
func (db *DB) WatchChanges(ctx context.Context, fn func(control.Change)) error {
	var last int64
	if err := db.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&last); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("sqlite: watch: %w", err)
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		changes, err := db.changesAfter(ctx, last)
		if err != nil {
			// A busy or briefly unavailable file is retried at the next tick.
			continue
		}
		for _, c := range changes {
			fn(c)
			last = c.Seq
		}
	}
}

func (db *DB) changesAfter(ctx context.Context, last int64) ([]control.Change, error) {
	rows, err := db.read.QueryContext(ctx, `SELECT seq, kind, id FROM changes WHERE seq > ? ORDER BY seq LIMIT 1000`, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []control.Change
	for rows.Next() {
		var c control.Change
		if err := rows.Scan(&c.Seq, &c.Kind, &c.ID); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// notFound maps sql.ErrNoRows to ENotFound with msg.
func notFound(err error, msg string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return control.Errorf(control.ENotFound, "%s", msg)
	}
	return err
}

// boolInt stores a bool as SQLite's 0/1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
