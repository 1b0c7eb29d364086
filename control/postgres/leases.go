package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

var _ control.LeaseService = (*DB)(nil)

// LeaseSlots sets holder's share of ws's kind slots (limiter_slots_lease,
// migration 009): one row per slot in limiter_leases, so that servers that
// take a row per request count the share, and the share counts theirs.
func (db *DB) LeaseSlots(ctx context.Context, holder, ws, kind string, limit, used, want int, ttl time.Duration) (held, free int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	err = db.pool.QueryRow(ctx, `SELECT held, free FROM limiter_slots_lease($1, $2, $3, $4, $5, $6, $7)`,
		ws, kind, limit, holder, used, want, ttl.Milliseconds()).Scan(&held, &free)
	if err != nil {
		return 0, 0, fmt.Errorf("postgres: lease slots: %w", err)
	}
	return held, free, nil
}

// SettleBilling applies the usage and sets the reservation in one
// transaction, under the locks of billing_charge (migration 004): the usage
// rows (months in order), then the workspace row. Holding the current
// month's usage row serializes it with every other settle and charge of
// the workspace, so that the reservations it counts cannot move under it.
func (db *DB) SettleBilling(ctx context.Context, holder string, s control.BillingSettle, ttl time.Duration) (_ control.BillingLease, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var out control.BillingLease
	err = db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('synchronous_commit', 'off', true)`); err != nil {
			return err
		}
		months := settleMonths(s)
		used := make(map[string]int64, len(months))
		for _, m := range months {
			var u int64
			if err := tx.QueryRow(ctx, `INSERT INTO usage (workspace_id, month, used)
				SELECT id, $2, 0 FROM workspaces WHERE id = $1
				ON CONFLICT (workspace_id, month) DO UPDATE SET used = usage.used RETURNING used`, s.WS, m).Scan(&u); err != nil {
				return notFound(err, "workspace not found")
			}
			used[m] = u
		}
		var credits int64
		if err := tx.QueryRow(ctx, `SELECT credits FROM workspaces WHERE id = $1 FOR NO KEY UPDATE`, s.WS).Scan(&credits); err != nil {
			return notFound(err, "workspace not found")
		}
		startCredits := credits
		for _, d := range s.Usage {
			if d.Chars == 0 {
				continue
			}
			m := d.Day[:7]
			used[m], credits, _, _ = control.ApplyUsage(s.Allowance, used[m], credits, d.Chars)
			if _, err := tx.Exec(ctx, `SELECT billing_daily_add($1, $2, $3)`, s.WS, d.Day, d.Chars); err != nil {
				return fmt.Errorf("postgres: daily usage: %w", err)
			}
		}
		for _, m := range months {
			if _, err := tx.Exec(ctx, `UPDATE usage SET used = $3 WHERE workspace_id = $1 AND month = $2`, s.WS, m, used[m]); err != nil {
				return fmt.Errorf("postgres: usage: %w", err)
			}
		}
		if credits != startCredits {
			if _, err := tx.Exec(ctx, `UPDATE workspaces SET credits = $2 WHERE id = $1`, s.WS, credits); err != nil {
				return fmt.Errorf("postgres: credits: %w", err)
			}
		}
		out.Balance = control.Balance{Allowance: s.Allowance, Used: used[s.Month], Credits: credits}
		if err := tx.QueryRow(ctx, `SELECT coalesce(sum(chars), 0) FROM billing_reservations
			WHERE workspace_id = $1 AND month = $2 AND holder <> $3 AND expires_at > limiter_now_ms()`,
			s.WS, s.Month, holder).Scan(&out.Others); err != nil {
			return fmt.Errorf("postgres: reservations: %w", err)
		}
		out.Reserved = control.ReservationGrant(out.Balance, out.Others, s.Reserve, s.Enforce)
		if out.Reserved == 0 {
			_, err := tx.Exec(ctx, `DELETE FROM billing_reservations WHERE workspace_id = $1 AND holder = $2`, s.WS, holder)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO billing_reservations (workspace_id, holder, month, chars, expires_at)
			VALUES ($1, $2, $3, $4, limiter_now_ms() + $5)
			ON CONFLICT (workspace_id, holder) DO UPDATE SET month = excluded.month, chars = excluded.chars,
				expires_at = excluded.expires_at`, s.WS, holder, s.Month, out.Reserved, ttl.Milliseconds())
		return err
	})
	if err != nil {
		return control.BillingLease{}, fmt.Errorf("postgres: settle billing: %w", err)
	}
	return out, nil
}

// settleMonths are the months a settle touches, in order (the lock order):
// the reserved month and those of the usage.
func settleMonths(s control.BillingSettle) []string {
	seen := map[string]bool{s.Month: true}
	ms := []string{s.Month}
	for _, d := range s.Usage {
		if m := d.Day[:7]; !seen[m] {
			seen[m] = true
			ms = append(ms, m)
		}
	}
	sort.Strings(ms)
	return ms
}

// RenewLeases extends holder's slot rows and reservations.
func (db *DB) RenewLeases(ctx context.Context, holder string, ttl time.Duration) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	b.Queue(`UPDATE limiter_leases SET expires_at = limiter_now_ms() + $2
		WHERE lease_id IN (SELECT lease_id FROM limiter_leases WHERE holder = $1 FOR UPDATE SKIP LOCKED)`, holder, ttl.Milliseconds())
	b.Queue(`UPDATE billing_reservations SET expires_at = limiter_now_ms() + $2 WHERE holder = $1`, holder, ttl.Milliseconds())
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: renew leases: %w", err)
	}
	return nil
}

// DropLeases gives back every share and reservation of holder.
func (db *DB) DropLeases(ctx context.Context, holder string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	b := &pgx.Batch{}
	b.Queue(`DELETE FROM limiter_leases WHERE holder = $1`, holder)
	b.Queue(`DELETE FROM billing_reservations WHERE holder = $1`, holder)
	if err := db.pool.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("postgres: drop leases: %w", err)
	}
	return nil
}

// LeaseRequests grants a share of ws's rps window (limiter_rate_lease,
// migration 010): recorded in the window of limiter_rate_take, so that
// servers that ask per request and servers that hold shares count each
// other.
func (db *DB) LeaseRequests(ctx context.Context, ws string, rps, want int, back control.RequestsBack) (g control.RequestsGrant, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	err = db.pool.QueryRow(ctx, `SELECT granted, remaining, reset_ms, at_ms FROM limiter_rate_lease($1, $2, $3, $4, $5)`,
		ws, rps, want, back.At, back.N).Scan(&g.Granted, &g.Remaining, &g.ResetMS, &g.At)
	if err != nil {
		return control.RequestsGrant{}, fmt.Errorf("postgres: lease requests: %w", err)
	}
	return g, nil
}
