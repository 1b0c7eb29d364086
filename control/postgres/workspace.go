package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

const workspaceCols = `id, name, plan, billing, streaming, allowance, credits, concurrency, rps, sessions, created_at, updated_at`

// CreateWorkspace inserts w, filling its id and timestamps when empty.
func (db *DB) CreateWorkspace(ctx context.Context, w *control.Workspace) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	w.SetDefaults(db.nowMS())
	_, err = db.pool.Exec(ctx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
		w.ID, w.Name, w.Plan, w.Billing, w.Streaming, w.Allowance, w.Credits, w.Concurrency, w.RPS, w.Sessions,
		w.CreatedAt, w.UpdatedAt)
	if err != nil {
		return fmt.Errorf("postgres: insert workspace: %w", err)
	}
	return nil
}

// GetWorkspace returns ENotFound for an unknown id.
func (db *DB) GetWorkspace(ctx context.Context, id string) (_ *control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	w, err := scanWorkspace(db.pool.QueryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "workspace not found")
	}
	return w, nil
}

// UpdateWorkspace applies upd under the workspace's row lock (the lock
// charges that need credits take too); Used sets the current UTC month's
// usage.
func (db *DB) UpdateWorkspace(ctx context.Context, id string, upd control.WorkspaceUpdate) (_ *control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var w *control.Workspace
	err = db.update(ctx, func(tx pgx.Tx) error {
		// Usage first: the lock order of billing_charge (migration 004) is
		// usage, then workspace. An unknown workspace rolls it back.
		if upd.Used != nil {
			_, err := tx.Exec(ctx, `INSERT INTO usage (workspace_id, month, used) VALUES ($1, $2, $3)
				ON CONFLICT (workspace_id, month) DO UPDATE SET used = excluded.used`,
				id, control.Month(db.now()), *upd.Used)
			if err != nil {
				return fmt.Errorf("postgres: set usage: %w", err)
			}
		}
		var err error
		w, err = scanWorkspace(tx.QueryRow(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return notFound(err, "workspace not found")
		}
		w.Apply(upd)
		w.UpdatedAt = db.nowMS()
		_, err = tx.Exec(ctx, `UPDATE workspaces SET plan=$1, billing=$2, streaming=$3, allowance=$4, credits=$5,
			concurrency=$6, rps=$7, sessions=$8, updated_at=$9 WHERE id=$10`,
			w.Plan, w.Billing, w.Streaming, w.Allowance, w.Credits, w.Concurrency, w.RPS, w.Sessions, w.UpdatedAt, id)
		if err != nil {
			return fmt.Errorf("postgres: update workspace: %w", err)
		}
		return db.recordChange(ctx, tx, "workspace", id, w.UpdatedAt)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func scanWorkspace(row pgx.Row) (*control.Workspace, error) {
	var w control.Workspace
	if err := row.Scan(&w.ID, &w.Name, &w.Plan, &w.Billing, &w.Streaming, &w.Allowance, &w.Credits,
		&w.Concurrency, &w.RPS, &w.Sessions, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	return &w, nil
}

const keyCols = `id, workspace_id, name, hash, scopes, legacy, expires_at, revoked_at, created_at`

// CreateAPIKey inserts k and records a change.
func (db *DB) CreateAPIKey(ctx context.Context, k *control.APIKey) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k.SetDefaults(db.nowMS())
	return db.update(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9)`,
			k.ID, k.WorkspaceID, k.Name, k.Hash, control.NonNil(k.Scopes), k.Legacy, k.ExpiresAt, k.RevokedAt, k.CreatedAt)
		if err != nil {
			return fmt.Errorf("postgres: insert key: %w", err)
		}
		return db.recordChange(ctx, tx, "key", k.ID, k.CreatedAt)
	})
}

// GetAPIKeyByHash returns ENotFound when no key has that hash.
func (db *DB) GetAPIKeyByHash(ctx context.Context, hash []byte) (_ *control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k, err := scanKey(db.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = $1`, hash))
	if err != nil {
		return nil, notFound(err, "key not found")
	}
	return k, nil
}

// GetAPIKey returns ENotFound for an unknown id.
func (db *DB) GetAPIKey(ctx context.Context, id string) (_ *control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k, err := scanKey(db.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, "key not found")
	}
	return k, nil
}

// RevokeAPIKey sets RevokedAt, keeping an earlier one, and records a change.
func (db *DB) RevokeAPIKey(ctx context.Context, id string, at int64) (_ *control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var k *control.APIKey
	err = db.update(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at = 0`, at, id)
		if err != nil {
			return fmt.Errorf("postgres: revoke key: %w", err)
		}
		k, err = scanKey(tx.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = $1`, id))
		if err != nil {
			return notFound(err, "key not found")
		}
		if tag.RowsAffected() == 0 {
			return nil // already revoked: nothing changed
		}
		return db.recordChange(ctx, tx, "key", id, db.nowMS())
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

func scanKey(row pgx.Row) (*control.APIKey, error) {
	var k control.APIKey
	if err := row.Scan(&k.ID, &k.WorkspaceID, &k.Name, &k.Hash, &k.Scopes, &k.Legacy, &k.ExpiresAt, &k.RevokedAt, &k.CreatedAt); err != nil {
		return nil, err
	}
	return &k, nil
}

const tokenCols = `id, hash, workspace_id, key_id, voice_ids, expires_at, consumed_at, created_at`

// CreateToken inserts t.
func (db *DB) CreateToken(ctx context.Context, t *control.AccessToken) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	t.SetDefaults(db.nowMS())
	_, err = db.pool.Exec(ctx, `INSERT INTO access_tokens (`+tokenCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)`,
		t.ID, t.Hash, t.WorkspaceID, t.KeyID, control.NonNil(t.VoiceIDs), t.ExpiresAt, t.ConsumedAt, t.CreatedAt)
	if err != nil {
		return fmt.Errorf("postgres: insert token: %w", err)
	}
	return nil
}

// GetTokenByHash returns ETokenInvalid when unknown.
func (db *DB) GetTokenByHash(ctx context.Context, hash []byte) (_ *control.AccessToken, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var t control.AccessToken
	err = db.pool.QueryRow(ctx, `SELECT `+tokenCols+` FROM access_tokens WHERE hash = $1`, hash).
		Scan(&t.ID, &t.Hash, &t.WorkspaceID, &t.KeyID, &t.VoiceIDs, &t.ExpiresAt, &t.ConsumedAt, &t.CreatedAt)
	if err == pgx.ErrNoRows {
		return nil, control.Errorf(control.ETokenInvalid, "access token unknown, expired or used")
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// ConsumeToken marks the token used with one conditional UPDATE: the row
// lock makes every other concurrent UPDATE re-check consumed_at and miss.
func (db *DB) ConsumeToken(ctx context.Context, hash []byte, now int64) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	tag, err := db.pool.Exec(ctx, `UPDATE access_tokens SET consumed_at = $1
		WHERE hash = $2 AND consumed_at = 0 AND expires_at > $1`, now, hash)
	if err != nil {
		return fmt.Errorf("postgres: consume token: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return control.Errorf(control.ETokenInvalid, "access token unknown, expired or used")
	}
	return nil
}

// ListWorkspaces returns every workspace, oldest first (voicesvc admin
// workspace list).
func (db *DB) ListWorkspaces(ctx context.Context) (_ []*control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.pool.Query(ctx, `SELECT `+workspaceCols+` FROM workspaces ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list workspaces: %w", err)
	}
	defer rows.Close()
	out := []*control.Workspace{}
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list workspaces: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
