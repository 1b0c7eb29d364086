package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"voicesvc/control"
)

// Charge takes chars for month from the allowance, then from credits, and
// adds what it took to the day's characters, in one IMMEDIATE transaction.
// The common case, a charge the allowance covers, is one prepared
// conditional upsert (sqlChargeFast). Anything else (credits, a refusal, an
// unknown workspace) continues in chargeSlow, in the same transaction, in
// which the read of used and credits and the write that follows cannot
// interleave with another charge. The transaction around the day's
// counter costs about 8 µs a charge (BenchmarkLimitsAndCharge p50 15 -> 23
// µs on a loaded 2-core machine): the price of a daily total that never
// disagrees with the month's.
func (db *DB) Charge(ctx context.Context, ws, month string, allowance, chars int64, enforce bool) (_ control.Charge, _ control.Balance, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	// The transaction runs without ctx's cancellation when it got the
	// write turn at once: for a context that can end, database/sql and
	// modernc each start a watcher goroutine per query, which together cost
	// about as much as the charge itself (35 µs on top of 50 µs, measured
	// on a loaded machine). Nothing is lost: such a charge waits only for
	// the file's lock, bounded by busy_timeout (the store timeout), and a
	// charge that ran is a charge made, whatever ctx says by then. One that
	// waited for its turn keeps ctx, so that behind a file another process
	// holds locked charges do not queue for a busy_timeout each.
	if err := ctx.Err(); err != nil {
		return control.Charge{}, control.Balance{}, err
	}
	waited, err := db.startWrite(ctx)
	if err != nil {
		return control.Charge{}, control.Balance{}, err
	}
	defer db.endWrite()
	if !waited {
		ctx = context.WithoutCancel(ctx)
	}
	c := control.Charge{WorkspaceID: ws, Month: month, Day: control.Day(db.now())}
	bal := control.Balance{Allowance: allowance}
	err = db.updateTurn(ctx, func(tx *sql.Tx) error {
		ok, err := db.chargeFast(ctx, tx, ws, month, allowance, chars, &bal)
		if err != nil {
			return err
		}
		if ok {
			c.FromAllowance = chars
		} else if err := db.chargeSlow(ctx, tx, &c, allowance, chars, enforce, &bal); err != nil {
			return err
		}
		return db.addDaily(ctx, tx, ws, c.Day, c.FromAllowance+c.FromCredits)
	})
	if err != nil {
		return control.Charge{}, control.Balance{}, err
	}
	return c, bal, nil
}

// chargeFast reports whether the allowance covered chars and, if so, fills
// bal with the state after the charge.
func (db *DB) chargeFast(ctx context.Context, tx *sql.Tx, ws, month string, allowance, chars int64, bal *control.Balance) (bool, error) {
	rows, err := tx.StmtContext(ctx, db.st.chargeFast).QueryContext(ctx, ws, month, allowance, chars)
	if err != nil {
		return false, fmt.Errorf("sqlite: charge: %w", err)
	}
	defer rows.Close()
	ok := false
	for rows.Next() {
		if err := rows.Scan(&bal.Used, &bal.Credits); err != nil {
			return false, fmt.Errorf("sqlite: charge: %w", err)
		}
		ok = true
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("sqlite: charge: %w", err)
	}
	return ok, nil
}

// chargeSlow decides a charge the allowance alone does not cover, filling
// c's amounts and bal.
func (db *DB) chargeSlow(ctx context.Context, tx *sql.Tx, c *control.Charge, allowance, chars int64, enforce bool, bal *control.Balance) error {
	var err error
	*bal, err = balance(ctx, tx.StmtContext(ctx, db.st.balanceTx), c.WorkspaceID, c.Month, allowance)
	if err != nil {
		return err
	}
	fromA, fromC, cerr := control.SplitCharge(allowance, bal.Used, bal.Credits, chars, enforce)
	if cerr != nil {
		return cerr
	}
	c.FromAllowance, c.FromCredits = fromA, fromC
	if err := db.addUsage(ctx, tx, c.WorkspaceID, c.Month, fromA, fromC); err != nil {
		return err
	}
	bal.Used += fromA
	bal.Credits -= fromC
	return nil
}

// Refund gives back exactly what c took, from its month and its day.
func (db *DB) Refund(ctx context.Context, c control.Charge) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	if c.FromAllowance == 0 && c.FromCredits == 0 {
		return nil
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if err := db.addUsage(ctx, tx, c.WorkspaceID, c.Month, -c.FromAllowance, -c.FromCredits); err != nil {
			return err
		}
		return db.addDaily(ctx, tx, c.WorkspaceID, c.Day, -(c.FromAllowance + c.FromCredits))
	})
}

// addDaily adds chars (negative: gives back) to the day's characters. A
// charge made before the daily counter existed has no day: nothing to give
// back there.
func (db *DB) addDaily(ctx context.Context, tx *sql.Tx, ws, day string, chars int64) error {
	if chars == 0 || day == "" {
		return nil
	}
	if _, err := tx.StmtContext(ctx, db.st.dailyAdd).ExecContext(ctx, ws, day, chars); err != nil {
		return fmt.Errorf("sqlite: daily usage: %w", err)
	}
	return nil
}

// Balance reports the month's state. ENotFound for an unknown workspace.
// One statement reads both values from one snapshot.
func (db *DB) Balance(ctx context.Context, ws, month string, allowance int64) (_ control.Balance, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return balance(ctx, db.st.balance, ws, month, allowance)
}

func balance(ctx context.Context, st *sql.Stmt, ws, month string, allowance int64) (control.Balance, error) {
	bal := control.Balance{Allowance: allowance}
	err := st.QueryRowContext(ctx, month, ws).Scan(&bal.Credits, &bal.Used)
	if err != nil {
		return bal, notFound(err, "workspace not found")
	}
	return bal, nil
}

// addUsage adds to the month's used characters and takes from credits
// (negative values give back).
func (db *DB) addUsage(ctx context.Context, tx *sql.Tx, ws, month string, used, credits int64) error {
	if used != 0 {
		if _, err := tx.StmtContext(ctx, db.st.usageAdd).ExecContext(ctx, ws, month, used); err != nil {
			return fmt.Errorf("sqlite: usage: %w", err)
		}
	}
	if credits != 0 {
		if _, err := tx.StmtContext(ctx, db.st.creditsTake).ExecContext(ctx, credits, ws); err != nil {
			return fmt.Errorf("sqlite: credits: %w", err)
		}
	}
	return nil
}

// BeginIdempotent claims key for a request with fingerprint. Entries older
// than control.IdempotencyTTL count as absent and are purged on the way.
func (db *DB) BeginIdempotent(ctx context.Context, ws, key, fingerprint string, now int64) (_ *control.IdempotentResponse, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var resp *control.IdempotentResponse
	err = db.update(ctx, func(tx *sql.Tx) error {
		cutoff := now - control.IdempotencyTTL.Milliseconds()
		if _, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at < ?`, cutoff); err != nil {
			return fmt.Errorf("sqlite: purge idempotency: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO idempotency (workspace_id, key, fingerprint, state, created_at)
			VALUES (?, ?, ?, 'in_progress', ?) ON CONFLICT (workspace_id, key) DO NOTHING`, ws, key, fingerprint, now)
		if err != nil {
			return fmt.Errorf("sqlite: claim idempotency key: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			return nil
		}
		var fp, state, headers string
		var r control.IdempotentResponse
		if err := tx.QueryRowContext(ctx, `SELECT fingerprint, state, status, headers, body FROM idempotency
			WHERE workspace_id = ? AND key = ?`, ws, key).Scan(&fp, &state, &r.Status, &headers, &r.Body); err != nil {
			return err
		}
		resp, err = control.ReplayIdempotent(fp, fingerprint, state, []byte(headers), r)
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
	return db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency SET state = 'done', status = ?, headers = ?, body = ?
			WHERE workspace_id = ? AND key = ?`, resp.Status, headers, body, ws, key)
		if err != nil {
			return fmt.Errorf("sqlite: finish idempotency: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return control.Errorf(control.ENotFound, "idempotency key not claimed")
		}
		return nil
	})
}

// AbandonIdempotent frees a claimed key so that a retry runs again.
func (db *DB) AbandonIdempotent(ctx context.Context, ws, key string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM idempotency WHERE workspace_id = ? AND key = ? AND state = 'in_progress'`, ws, key)
		if err != nil {
			return fmt.Errorf("sqlite: abandon idempotency: %w", err)
		}
		return nil
	})
}
