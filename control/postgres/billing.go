package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

// Charge takes chars for month from the allowance, then from credits, and
// adds them to the day's characters, in one round trip: billing_charge
// (migration 006, the rule of 004) adds a charge the allowance
// covers with one conditional upsert under the usage row's lock, and decides
// any other under the usage row's and then the workspace row's lock, so
// charges on any server never lose an update nor overdraw.
func (db *DB) Charge(ctx context.Context, ws, month string, allowance, chars int64, enforce bool) (_ control.Charge, _ control.Balance, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	day := control.Day(db.now())
	var found, ok bool
	var used, credits, fromA, fromC int64
	err = db.pool.QueryRow(ctx, `SELECT ws_found, ok, coalesce(used_before, 0), coalesce(credits_before, 0),
		from_allowance, from_credits FROM billing_charge($1, $2, $3, $4, $5, $6)`, ws, month, day, allowance, chars, enforce).
		Scan(&found, &ok, &used, &credits, &fromA, &fromC)
	if err != nil {
		return control.Charge{}, control.Balance{}, fmt.Errorf("postgres: charge: %w", err)
	}
	if !found {
		return control.Charge{}, control.Balance{}, control.Errorf(control.ENotFound, "workspace not found")
	}
	if !ok {
		// The same rule in Go builds the refusal with its details.
		if _, _, cerr := control.SplitCharge(allowance, used, credits, chars, enforce); cerr != nil {
			return control.Charge{}, control.Balance{}, cerr
		}
		return control.Charge{}, control.Balance{}, fmt.Errorf("postgres: charge refused but Go rule admits it")
	}
	c := control.Charge{WorkspaceID: ws, Month: month, Day: day, FromAllowance: fromA, FromCredits: fromC}
	return c, control.Balance{Allowance: allowance, Used: used + fromA, Credits: credits - fromC}, nil
}

// Refund gives back exactly what c took, from its month and its day.
func (db *DB) Refund(ctx context.Context, c control.Charge) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	if c.FromAllowance == 0 && c.FromCredits == 0 {
		return nil
	}
	return db.update(ctx, func(tx pgx.Tx) error {
		if err := addUsage(ctx, tx, c.WorkspaceID, c.Month, -c.FromAllowance, -c.FromCredits); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT billing_daily_add($1, $2, $3)`, c.WorkspaceID, c.Day, -(c.FromAllowance + c.FromCredits))
		if err != nil {
			return fmt.Errorf("postgres: daily usage: %w", err)
		}
		return nil
	})
}

// Balance reports the month's state. ENotFound for an unknown workspace.
func (db *DB) Balance(ctx context.Context, ws, month string, allowance int64) (_ control.Balance, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	bal := control.Balance{Allowance: allowance}
	err = db.pool.QueryRow(ctx, `SELECT w.credits, COALESCE(u.used, 0) FROM workspaces w
		LEFT JOIN usage u ON u.workspace_id = w.id AND u.month = $1 WHERE w.id = $2`, month, ws).Scan(&bal.Credits, &bal.Used)
	if err != nil {
		return bal, notFound(err, "workspace not found")
	}
	return bal, nil
}

// addUsage adds to the month's used characters and takes from credits
// (negative values give back). The usage row is written first: the lock
// order of billing_charge (migration 004) is usage, then workspace, and a
// refund in the other order could deadlock with a charge.
func addUsage(ctx context.Context, tx pgx.Tx, ws, month string, used, credits int64) error {
	if used != 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO usage (workspace_id, month, used) VALUES ($1, $2, $3)
			ON CONFLICT (workspace_id, month) DO UPDATE SET used = usage.used + excluded.used`, ws, month, used); err != nil {
			return fmt.Errorf("postgres: usage: %w", err)
		}
	}
	// Also the existence check: an unknown workspace rolls the usage back.
	tag, err := tx.Exec(ctx, `UPDATE workspaces SET credits = credits - $1 WHERE id = $2`, credits, ws)
	if err != nil {
		return fmt.Errorf("postgres: credits: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return control.Errorf(control.ENotFound, "workspace not found")
	}
	return nil
}

// BeginIdempotent claims key for a request with fingerprint. Entries older
// than control.IdempotencyTTL count as absent and are purged on the way.
func (db *DB) BeginIdempotent(ctx context.Context, ws, key, fingerprint string, now int64) (_ *control.IdempotentResponse, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	cutoff := now - control.IdempotencyTTL.Milliseconds()
	// Purge a few other expired keys on the way, outside the transaction and
	// skipping locked rows, so that concurrent purges never deadlock.
	_, _ = db.pool.Exec(ctx, `DELETE FROM idempotency WHERE ctid IN (SELECT ctid FROM idempotency
		WHERE created_at < $1 LIMIT 100 FOR UPDATE SKIP LOCKED)`, cutoff)
	var resp *control.IdempotentResponse
	err = db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE workspace_id = $1 AND key = $2 AND created_at < $3`,
			ws, key, cutoff); err != nil {
			return fmt.Errorf("postgres: expire idempotency key: %w", err)
		}
		res, err := tx.Exec(ctx, `INSERT INTO idempotency (workspace_id, key, fingerprint, state, created_at)
			VALUES ($1, $2, $3, 'in_progress', $4) ON CONFLICT (workspace_id, key) DO NOTHING`, ws, key, fingerprint, now)
		if err != nil {
			return fmt.Errorf("postgres: claim idempotency key: %w", err)
		}
		if res.RowsAffected() == 1 {
			return nil
		}
		var fp, state string
		var headers []byte
		var r control.IdempotentResponse
		if err := tx.QueryRow(ctx, `SELECT fingerprint, state, status, headers, body FROM idempotency
			WHERE workspace_id = $1 AND key = $2`, ws, key).Scan(&fp, &state, &r.Status, &headers, &r.Body); err != nil {
			return err
		}
		resp, err = control.ReplayIdempotent(fp, fingerprint, state, headers, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// FinishIdempotent stores the response of a claimed key. ENotFound when the
// key is not claimed (abandoned or expired meanwhile).
func (db *DB) FinishIdempotent(ctx context.Context, ws, key string, resp *control.IdempotentResponse) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	headers, body, err := control.EncodeIdempotent(resp)
	if err != nil {
		return err
	}
	tag, err := db.pool.Exec(ctx, `UPDATE idempotency SET state = 'done', status = $1, headers = $2, body = $3
		WHERE workspace_id = $4 AND key = $5`, resp.Status, headers, body, ws, key)
	if err != nil {
		return fmt.Errorf("postgres: finish idempotency: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return control.Errorf(control.ENotFound, "idempotency key not claimed")
	}
	return nil
}

// AbandonIdempotent frees a claimed key so that a retry runs again.
func (db *DB) AbandonIdempotent(ctx context.Context, ws, key string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	_, err = db.pool.Exec(ctx, `DELETE FROM idempotency WHERE workspace_id = $1 AND key = $2 AND state = 'in_progress'`, ws, key)
	if err != nil {
		return fmt.Errorf("postgres: abandon idempotency: %w", err)
	}
	return nil
}
