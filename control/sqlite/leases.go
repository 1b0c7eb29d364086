package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"voicesvc/control"
)

var _ control.LeaseService = (*DB)(nil)

// LeaseSlots sets holder's share of ws's kind slots. One server uses a
// SQLite file, but the share is kept like Postgres's so that a second
// process on the same file (or a server restarted before its share
// expired) keeps the limit.
func (db *DB) LeaseSlots(ctx context.Context, holder, ws, kind string, limit, used, want int, ttl time.Duration) (held, free int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.now().UnixMilli()
	err = db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM slot_leases WHERE workspace_id = ? AND kind = ? AND expires_at <= ?`,
			ws, kind, now); err != nil {
			return err
		}
		var others int
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(held), 0) FROM slot_leases
			WHERE workspace_id = ? AND kind = ? AND holder <> ?`, ws, kind, holder).Scan(&others); err != nil {
			return err
		}
		held = max(min(max(want, 0), max(limit-others, 0)), used)
		free = max(limit-others-held, 0)
		if held == 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM slot_leases WHERE workspace_id = ? AND kind = ? AND holder = ?`, ws, kind, holder)
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO slot_leases (workspace_id, kind, holder, held, expires_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id, kind, holder)
			DO UPDATE SET held = excluded.held, expires_at = excluded.expires_at`,
			ws, kind, holder, held, now+ttl.Milliseconds())
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("sqlite: lease slots: %w", err)
	}
	return held, free, nil
}

// SettleBilling applies the usage and sets the reservation in one write
// transaction (the file's single writer serializes it with every charge).
func (db *DB) SettleBilling(ctx context.Context, holder string, s control.BillingSettle, ttl time.Duration) (_ control.BillingLease, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.now().UnixMilli()
	var out control.BillingLease
	err = db.update(ctx, func(tx *sql.Tx) error {
		var credits int64
		if err := tx.QueryRowContext(ctx, `SELECT credits FROM workspaces WHERE id = ?`, s.WS).Scan(&credits); err != nil {
			return notFound(err, "workspace not found")
		}
		used := map[string]int64{}
		usedOf := func(m string) (int64, error) {
			if u, ok := used[m]; ok {
				return u, nil
			}
			var u int64
			err := tx.QueryRowContext(ctx, `SELECT used FROM usage WHERE workspace_id = ? AND month = ?`, s.WS, m).Scan(&u)
			if err == sql.ErrNoRows {
				err = nil
			}
			used[m] = u
			return u, err
		}
		startCredits := credits
		for _, d := range s.Usage {
			if d.Chars == 0 {
				continue
			}
			m := d.Day[:7]
			u, err := usedOf(m)
			if err != nil {
				return err
			}
			before := u
			u, credits, _, _ = control.ApplyUsage(s.Allowance, u, credits, d.Chars)
			used[m] = u
			if err := db.addUsage(ctx, tx, s.WS, m, u-before, 0); err != nil {
				return err
			}
			if err := db.addDaily(ctx, tx, s.WS, d.Day, d.Chars); err != nil {
				return err
			}
		}
		if credits != startCredits {
			if err := db.addUsage(ctx, tx, s.WS, s.Month, 0, startCredits-credits); err != nil {
				return err
			}
		}
		u, err := usedOf(s.Month)
		if err != nil {
			return err
		}
		out.Balance = control.Balance{Allowance: s.Allowance, Used: u, Credits: credits}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(chars), 0) FROM billing_reservations
			WHERE workspace_id = ? AND month = ? AND holder <> ? AND expires_at > ?`, s.WS, s.Month, holder, now).Scan(&out.Others); err != nil {
			return err
		}
		out.Reserved = control.ReservationGrant(out.Balance, out.Others, s.Reserve, s.Enforce)
		if out.Reserved == 0 {
			_, err := tx.ExecContext(ctx, `DELETE FROM billing_reservations WHERE workspace_id = ? AND holder = ?`, s.WS, holder)
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO billing_reservations (workspace_id, holder, month, chars, expires_at)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (workspace_id, holder) DO UPDATE SET month = excluded.month,
			chars = excluded.chars, expires_at = excluded.expires_at`, s.WS, holder, s.Month, out.Reserved, now+ttl.Milliseconds())
		return err
	})
	if err != nil {
		return control.BillingLease{}, fmt.Errorf("sqlite: settle billing: %w", err)
	}
	return out, nil
}

// RenewLeases extends holder's shares and reservations.
func (db *DB) RenewLeases(ctx context.Context, holder string, ttl time.Duration) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	at := db.now().UnixMilli() + ttl.Milliseconds()
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE slot_leases SET expires_at = ? WHERE holder = ?`, at, holder); err != nil {
			return fmt.Errorf("sqlite: renew leases: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE billing_reservations SET expires_at = ? WHERE holder = ?`, at, holder); err != nil {
			return fmt.Errorf("sqlite: renew leases: %w", err)
		}
		return nil
	})
}

// DropLeases gives back every share and reservation of holder.
func (db *DB) DropLeases(ctx context.Context, holder string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM slot_leases WHERE holder = ?`, holder); err != nil {
			return fmt.Errorf("sqlite: drop leases: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM billing_reservations WHERE holder = ?`, holder); err != nil {
			return fmt.Errorf("sqlite: drop leases: %w", err)
		}
		return nil
	})
}

// LeaseRequests grants a share of ws's rps window (rate_window, migration
// 006), like Postgres's: a second process on the same file shares the
// window.
func (db *DB) LeaseRequests(ctx context.Context, ws string, rps, want int, back control.RequestsBack) (g control.RequestsGrant, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.now().UnixMilli()
	err = db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM rate_window WHERE workspace_id = ? AND at <= ?`, ws, now-1000); err != nil {
			return err
		}
		if back.N > 0 {
			if _, err := tx.ExecContext(ctx, `UPDATE rate_window SET n = max(n - ?, 0) WHERE workspace_id = ? AND at = ?`,
				back.N, ws, back.At); err != nil {
				return err
			}
		}
		var n int
		var oldest sql.NullInt64
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(sum(n), 0), min(at) FROM rate_window WHERE workspace_id = ?`,
			ws).Scan(&n, &oldest); err != nil {
			return err
		}
		g.At = now
		g.Granted = max(min(want, rps-n), 0)
		if g.Granted > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO rate_window (workspace_id, at, n) VALUES (?, ?, ?)
				ON CONFLICT (workspace_id, at) DO UPDATE SET n = n + excluded.n`, ws, now, g.Granted); err != nil {
				return err
			}
			if !oldest.Valid {
				oldest = sql.NullInt64{Int64: now, Valid: true}
			}
		}
		g.Remaining = max(rps-n-g.Granted, 0)
		if g.Remaining == 0 && oldest.Valid {
			g.ResetMS = max(oldest.Int64+1000-now, 1)
		}
		return nil
	})
	if err != nil {
		return control.RequestsGrant{}, fmt.Errorf("sqlite: lease requests: %w", err)
	}
	return g, nil
}
