package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

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
	if _, err := db.pool.Exec(ctx, `DELETE FROM login_links WHERE expires_at <= $1`, now); err != nil {
		return fmt.Errorf("postgres: purge login links: %w", err)
	}
	tag, err := db.pool.Exec(ctx, `INSERT INTO login_links (hash, workspace_id, expires_at, created_at)
		SELECT $1, id, $3, $4 FROM workspaces WHERE id = $2`, l.Hash, l.WorkspaceID, l.ExpiresAt, l.CreatedAt)
	if err != nil {
		return fmt.Errorf("postgres: insert login link: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return control.Errorf(control.ENotFound, "workspace not found")
	}
	return nil
}

// RedeemLoginLink deletes the link and stores the session in one
// transaction; the DELETE takes the link's row lock, so of concurrent
// redemptions one deletes it and the others find nothing.
func (db *DB) RedeemLoginLink(ctx context.Context, hash []byte, now int64, sess *control.DashboardSession) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx pgx.Tx) error {
		var ws string
		err := tx.QueryRow(ctx, `DELETE FROM login_links WHERE hash = $1 AND expires_at > $2
			RETURNING workspace_id`, hash, now).Scan(&ws)
		if errors.Is(err, pgx.ErrNoRows) {
			return control.ErrLoginLinkInvalid()
		}
		if err != nil {
			return fmt.Errorf("postgres: redeem login link: %w", err)
		}
		sess.WorkspaceID = ws
		sess.SetDefaults(now)
		if _, err := tx.Exec(ctx, `DELETE FROM dashboard_sessions WHERE expires_at <= $1`, now); err != nil {
			return fmt.Errorf("postgres: purge sessions: %w", err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO dashboard_sessions (id, hash, workspace_id, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5)`, sess.ID, sess.Hash, sess.WorkspaceID, sess.ExpiresAt, sess.CreatedAt)
		if err != nil {
			return fmt.Errorf("postgres: insert session: %w", err)
		}
		return nil
	})
}

// GetDashboardSession returns the live session with hash.
func (db *DB) GetDashboardSession(ctx context.Context, hash []byte, now int64) (_ *control.DashboardSession, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var s control.DashboardSession
	err = db.pool.QueryRow(ctx, `SELECT id, hash, workspace_id, expires_at, created_at
		FROM dashboard_sessions WHERE hash = $1 AND expires_at > $2`, hash, now).
		Scan(&s.ID, &s.Hash, &s.WorkspaceID, &s.ExpiresAt, &s.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, control.ErrSessionInvalid()
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: session: %w", err)
	}
	return &s, nil
}

// DeleteDashboardSession ends the session with hash.
func (db *DB) DeleteDashboardSession(ctx context.Context, hash []byte) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	if _, err := db.pool.Exec(ctx, `DELETE FROM dashboard_sessions WHERE hash = $1`, hash); err != nil {
		return fmt.Errorf("postgres: delete session: %w", err)
	}
	return nil
}

// ListAPIKeys returns the workspace's keys, newest first.
func (db *DB) ListAPIKeys(ctx context.Context, ws string) (_ []*control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys WHERE workspace_id = $1
		ORDER BY created_at DESC, id DESC`, ws)
	if err != nil {
		return nil, fmt.Errorf("postgres: list keys: %w", err)
	}
	defer rows.Close()
	keys := []*control.APIKey{}
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list keys: %w", err)
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// DailyUsage returns the billed days of ws from..to, oldest first.
func (db *DB) DailyUsage(ctx context.Context, ws, from, to string) (_ []control.DailyUsage, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.pool.Query(ctx, `SELECT day, characters FROM usage_daily
		WHERE workspace_id = $1 AND day >= $2 AND day <= $3 AND characters <> 0 ORDER BY day`, ws, from, to)
	if err != nil {
		return nil, fmt.Errorf("postgres: daily usage: %w", err)
	}
	defer rows.Close()
	days := []control.DailyUsage{}
	for rows.Next() {
		var d control.DailyUsage
		if err := rows.Scan(&d.Date, &d.Characters); err != nil {
			return nil, fmt.Errorf("postgres: daily usage: %w", err)
		}
		days = append(days, d)
	}
	return days, rows.Err()
}
