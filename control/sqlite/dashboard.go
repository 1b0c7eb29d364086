package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"voicesvc/control"
)

// CreateLoginLink stores l, purging expired links on the way.
func (db *DB) CreateLoginLink(ctx context.Context, l *control.LoginLink) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.nowMS()
	if l.CreatedAt == 0 {
		l.CreatedAt = now
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM login_links WHERE expires_at <= ?`, now); err != nil {
			return fmt.Errorf("sqlite: purge login links: %w", err)
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM workspaces WHERE id = ?`, l.WorkspaceID).Scan(&one); err != nil {
			return notFound(err, "workspace not found")
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO login_links (hash, workspace_id, expires_at, created_at)
			VALUES (?, ?, ?, ?)`, l.Hash, l.WorkspaceID, l.ExpiresAt, l.CreatedAt)
		if err != nil {
			return fmt.Errorf("sqlite: insert login link: %w", err)
		}
		return nil
	})
}

// RedeemLoginLink deletes the link and stores the session in one write
// transaction, so that a link starts at most one session.
func (db *DB) RedeemLoginLink(ctx context.Context, hash []byte, now int64, sess *control.DashboardSession) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		var ws string
		err := tx.QueryRowContext(ctx, `DELETE FROM login_links WHERE hash = ? AND expires_at > ?
			RETURNING workspace_id`, hash, now).Scan(&ws)
		if errors.Is(err, sql.ErrNoRows) {
			return control.ErrLoginLinkInvalid()
		}
		if err != nil {
			return fmt.Errorf("sqlite: redeem login link: %w", err)
		}
		sess.WorkspaceID = ws
		sess.SetDefaults(now)
		if _, err := tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= ?`, now); err != nil {
			return fmt.Errorf("sqlite: purge sessions: %w", err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO dashboard_sessions (id, hash, workspace_id, expires_at, created_at)
			VALUES (?, ?, ?, ?, ?)`, sess.ID, sess.Hash, sess.WorkspaceID, sess.ExpiresAt, sess.CreatedAt)
		if err != nil {
			return fmt.Errorf("sqlite: insert session: %w", err)
		}
		return nil
	})
}

// GetDashboardSession returns the live session with hash.
func (db *DB) GetDashboardSession(ctx context.Context, hash []byte, now int64) (_ *control.DashboardSession, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var s control.DashboardSession
	err = db.read.QueryRowContext(ctx, `SELECT id, hash, workspace_id, expires_at, created_at
		FROM dashboard_sessions WHERE hash = ? AND expires_at > ?`, hash, now).
		Scan(&s.ID, &s.Hash, &s.WorkspaceID, &s.ExpiresAt, &s.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, control.ErrSessionInvalid()
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: session: %w", err)
	}
	return &s, nil
}

// DeleteDashboardSession ends the session with hash.
func (db *DB) DeleteDashboardSession(ctx context.Context, hash []byte) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM dashboard_sessions WHERE hash = ?`, hash); err != nil {
			return fmt.Errorf("sqlite: delete session: %w", err)
		}
		return nil
	})
}

// ListAPIKeys returns the workspace's keys, newest first.
func (db *DB) ListAPIKeys(ctx context.Context, ws string) (_ []*control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.read.QueryContext(ctx, `SELECT `+keyCols+` FROM api_keys WHERE workspace_id = ?
		ORDER BY created_at DESC, id DESC`, ws)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list keys: %w", err)
	}
	defer rows.Close()
	keys := []*control.APIKey{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list keys: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// DailyUsage returns the billed days of ws from..to, oldest first.
func (db *DB) DailyUsage(ctx context.Context, ws, from, to string) (_ []control.DailyUsage, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.read.QueryContext(ctx, `SELECT day, characters FROM usage_daily
		WHERE workspace_id = ? AND day >= ? AND day <= ? AND characters <> 0 ORDER BY day`, ws, from, to)
	if err != nil {
		return nil, fmt.Errorf("sqlite: daily usage: %w", err)
	}
	defer rows.Close()
	days := []control.DailyUsage{}
	for rows.Next() {
		var d control.DailyUsage
		if err := rows.Scan(&d.Date, &d.Characters); err != nil {
			return nil, fmt.Errorf("sqlite: daily usage: %w", err)
		}
		days = append(days, d)
	}
	return days, rows.Err()
}
