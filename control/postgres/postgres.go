// Package postgres is the shared store of voicesvc for any number of servers
// (jackc/pgx/v5). Cross-server state (token use, billing, idempotency, job
// claims, limits) is decided by row locks and conditional writes here, and
// changes reach every server through LISTEN/NOTIFY.
package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"voicesvc/control"
)

var _ control.Store = (*DB)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

// Advisory lock keys (pg_advisory_xact_lock), constant across versions.
const (
	lockMigrate int64 = 0x766f6963_65000001 // "voice" + 1
	lockSeed    int64 = 0x766f6963_65000002
)

// DB is the Postgres store.
type DB struct {
	pool    *pgxpool.Pool
	channel string // NOTIFY channel, per schema so that schemas do not mix
	now     func() time.Time
	timeout time.Duration // bounds every store call (call)
}

// Options tune a store; zero values take the defaults.
type Options struct {
	// Timeout bounds every store call (DefaultTimeout): past it the call
	// fails with store_unavailable, as when the server cannot be reached.
	Timeout time.Duration
}

// Open connects to dsn (a postgres:// URL or key=value string; unknown
// parameters such as search_path become session settings) and applies
// pending migrations.
func Open(ctx context.Context, dsn string) (*DB, error) { return OpenWith(ctx, dsn, Options{}) }

// OpenWith is Open with options. A database that cannot be reached is
// store_unavailable here too.
func OpenWith(ctx context.Context, dsn string, opts Options) (_ *DB, err error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	defer func() {
		if err != nil && unavailable(err) {
			err = control.StoreUnavailableError(err)
		}
	}()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// pgx's default (4 on small machines) queues requests behind
		// long-held connections like row-locked charges.
		cfg.MaxConns = 16
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db := &DB{pool: pool, now: time.Now, timeout: opts.Timeout}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: current schema: %w", err)
	}
	db.channel = "voicesvc_changes_" + schema
	if len(db.channel) > 63 {
		db.channel = db.channel[:63]
	}
	return db, nil
}

// Close closes the pool.
func (db *DB) Close() error {
	db.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.pool.Ping(ctx)
}

// migrate applies the embedded migrations not yet recorded, holding an
// advisory lock so that servers starting together apply each once.
func (db *DB) migrate(ctx context.Context) error {
	return db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockMigrate); err != nil {
			return fmt.Errorf("postgres: migration lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version integer PRIMARY KEY, applied_at bigint NOT NULL)`); err != nil {
			return fmt.Errorf("postgres: migrations table: %w", err)
		}
		names, err := fs.Glob(migrations, "migrations/*.sql")
		if err != nil {
			return err
		}
		sort.Strings(names)
		for _, name := range names {
			base := path.Base(name)
			version, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
			if err != nil {
				return fmt.Errorf("postgres: migration %s: bad version", base)
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, version).Scan(&done); err != nil {
				return err
			}
			if done {
				continue
			}
			body, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, string(body)); err != nil {
				return fmt.Errorf("postgres: migration %s: %w", base, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)`,
				version, time.Now().UnixMilli()); err != nil {
				return err
			}
		}
		return nil
	})
}

// update runs fn in a transaction, committing when it returns nil.
func (db *DB) update(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, fn)
}

func (db *DB) nowMS() int64 { return db.now().UnixMilli() }

// recordChange appends to the change feed and notifies listeners inside the
// changing transaction: Postgres delivers the NOTIFY only if it commits.
func (db *DB) recordChange(ctx context.Context, tx pgx.Tx, kind, id string, now int64) error {
	var seq int64
	if err := tx.QueryRow(ctx, `INSERT INTO changes (kind, id, created_at) VALUES ($1, $2, $3) RETURNING seq`,
		kind, id, now).Scan(&seq); err != nil {
		return fmt.Errorf("postgres: record change: %w", err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, db.channel, fmt.Sprintf("%d %s %s", seq, kind, id)); err != nil {
		return fmt.Errorf("postgres: notify: %w", err)
	}
	if seq%256 == 0 { // trim now and then; servers only read recent rows
		if _, err := tx.Exec(ctx, `DELETE FROM changes WHERE created_at < $1`, now-time.Hour.Milliseconds()); err != nil {
			return fmt.Errorf("postgres: trim changes: %w", err)
		}
	}
	return nil
}

// idlePoll is how long the listener waits for a notification before it
// checks the table itself: it catches changes whose NOTIFY was missed and
// proves the connection is alive.
const idlePoll = 5 * time.Second

// WatchChanges listens for change notifications on a dedicated connection
// (not from the pool, which it would otherwise hold forever) and calls fn
// for every change made after the call started, until ctx ends. After a lost
// connection it reconnects and catches up from the changes table.
func (db *DB) WatchChanges(ctx context.Context, fn func(control.Change)) error {
	var last int64
	if err := db.pool.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM changes`).Scan(&last); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("postgres: watch: %w", err)
	}
	for {
		err := db.listen(ctx, &last, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		_ = err // the connection broke: wait a little and reconnect
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// listen runs one listening connection until it fails or ctx ends.
func (db *DB) listen(ctx context.Context, last *int64, fn func(control.Change)) error {
	cfg := db.pool.Config().ConnConfig // a copy
	// Named after the channel so that operators see what it is.
	cfg.RuntimeParams["application_name"] = db.channel
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{db.channel}.Sanitize()); err != nil {
		return err
	}
	// Listening now: anything committed before is in the table.
	catchUp := func() error {
		changes, err := changesAfter(ctx, conn, *last)
		for _, c := range changes {
			fn(c)
			*last = max(*last, c.Seq)
		}
		return err
	}
	if err := catchUp(); err != nil {
		return err
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, idlePoll)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, context.DeadlineExceeded):
			if err := catchUp(); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		}
		c, ok := parseChange(n.Payload)
		if !ok {
			continue
		}
		// Sequence numbers may commit out of order, so a notification is
		// delivered even when older than last; last only bounds catch-up.
		fn(c)
		*last = max(*last, c.Seq)
	}
}

func parseChange(payload string) (control.Change, bool) {
	f := strings.SplitN(payload, " ", 3)
	if len(f) != 3 {
		return control.Change{}, false
	}
	seq, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return control.Change{}, false
	}
	return control.Change{Seq: seq, Kind: f[1], ID: f[2]}, true
}

func changesAfter(ctx context.Context, conn *pgx.Conn, last int64) ([]control.Change, error) {
	rows, err := conn.Query(ctx, `SELECT seq, kind, id FROM changes WHERE seq > $1 ORDER BY seq LIMIT 1000`, last)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (control.Change, error) {
		var c control.Change
		err := r.Scan(&c.Seq, &c.Kind, &c.ID)
		return c, err
	})
}

// querier is the pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// notFound maps pgx.ErrNoRows to ENotFound with msg.
func notFound(err error, msg string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return control.Errorf(control.ENotFound, "%s", msg)
	}
	return err
}
