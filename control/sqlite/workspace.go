package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"voicesvc/control"
)

const workspaceCols = `id, name, plan, billing, streaming, allowance, credits, concurrency, rps, sessions, created_at, updated_at`

// CreateWorkspace inserts w, filling its id and timestamps when empty.
func (db *DB) CreateWorkspace(ctx context.Context, w *control.Workspace) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	w.SetDefaults(db.nowMS())
	return db.update(ctx, func(tx *sql.Tx) error {
		return insertWorkspace(ctx, tx, w)
	})
}

func insertWorkspace(ctx context.Context, tx *sql.Tx, w *control.Workspace) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO workspaces (`+workspaceCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		w.ID, w.Name, w.Plan, w.Billing, nullBool(w.Streaming), nullInt64(w.Allowance), w.Credits,
		nullInt(w.Concurrency), nullInt(w.RPS), nullInt(w.Sessions), w.CreatedAt, w.UpdatedAt)
	if err != nil {
		return fmt.Errorf("sqlite: insert workspace: %w", err)
	}
	return nil
}

// GetWorkspace returns ENotFound for an unknown id.
func (db *DB) GetWorkspace(ctx context.Context, id string) (_ *control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	w, err := scanWorkspace(db.st.workspaceByID.QueryRowContext(ctx, id))
	if err != nil {
		return nil, notFound(err, "workspace not found")
	}
	return w, nil
}

// UpdateWorkspace applies upd; Used sets the current UTC month's usage.
func (db *DB) UpdateWorkspace(ctx context.Context, id string, upd control.WorkspaceUpdate) (_ *control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var w *control.Workspace
	err = db.update(ctx, func(tx *sql.Tx) error {
		var err error
		w, err = scanWorkspace(tx.QueryRowContext(ctx, `SELECT `+workspaceCols+` FROM workspaces WHERE id = ?`, id))
		if err != nil {
			return notFound(err, "workspace not found")
		}
		w.Apply(upd)
		w.UpdatedAt = db.nowMS()
		_, err = tx.ExecContext(ctx, `UPDATE workspaces SET plan=?, billing=?, streaming=?, allowance=?, credits=?,
			concurrency=?, rps=?, sessions=?, updated_at=? WHERE id=?`,
			w.Plan, w.Billing, nullBool(w.Streaming), nullInt64(w.Allowance), w.Credits,
			nullInt(w.Concurrency), nullInt(w.RPS), nullInt(w.Sessions), w.UpdatedAt, id)
		if err != nil {
			return fmt.Errorf("sqlite: update workspace: %w", err)
		}
		if upd.Used != nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO usage (workspace_id, month, used) VALUES (?, ?, ?)
				ON CONFLICT (workspace_id, month) DO UPDATE SET used = excluded.used`,
				id, control.Month(db.now()), *upd.Used)
			if err != nil {
				return fmt.Errorf("sqlite: set usage: %w", err)
			}
		}
		return recordChange(ctx, tx, "workspace", id, w.UpdatedAt)
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func scanWorkspace(s rowScanner) (*control.Workspace, error) {
	var w control.Workspace
	var streaming sql.NullBool
	var allowance sql.NullInt64
	var conc, rps, sessions sql.NullInt64
	if err := s.Scan(&w.ID, &w.Name, &w.Plan, &w.Billing, &streaming, &allowance, &w.Credits,
		&conc, &rps, &sessions, &w.CreatedAt, &w.UpdatedAt); err != nil {
		return nil, err
	}
	if streaming.Valid {
		w.Streaming = ptr(streaming.Bool)
	}
	if allowance.Valid {
		w.Allowance = ptr(allowance.Int64)
	}
	w.Concurrency, w.RPS, w.Sessions = intPtr(conc), intPtr(rps), intPtr(sessions)
	return &w, nil
}

const keyCols = `id, workspace_id, name, hash, scopes, legacy, expires_at, revoked_at, created_at`

// CreateAPIKey inserts k and records a change.
func (db *DB) CreateAPIKey(ctx context.Context, k *control.APIKey) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k.SetDefaults(db.nowMS())
	scopes, err := json.Marshal(control.NonNil(k.Scopes))
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (`+keyCols+`) VALUES (?,?,?,?,?,?,?,?,?)`,
			k.ID, k.WorkspaceID, k.Name, k.Hash, string(scopes), boolInt(k.Legacy), k.ExpiresAt, k.RevokedAt, k.CreatedAt)
		if err != nil {
			return fmt.Errorf("sqlite: insert key: %w", err)
		}
		return recordChange(ctx, tx, "key", k.ID, k.CreatedAt)
	})
}

// GetAPIKeyByHash returns ENotFound when no key has that hash.
func (db *DB) GetAPIKeyByHash(ctx context.Context, hash []byte) (_ *control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k, err := scanKey(db.st.keyByHash.QueryRowContext(ctx, hash))
	if err != nil {
		return nil, notFound(err, "key not found")
	}
	return k, nil
}

// GetAPIKey returns ENotFound for an unknown id.
func (db *DB) GetAPIKey(ctx context.Context, id string) (_ *control.APIKey, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	k, err := scanKey(db.read.QueryRowContext(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`, id))
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
	err = db.update(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at = 0`, at, id)
		if err != nil {
			return fmt.Errorf("sqlite: revoke key: %w", err)
		}
		k, err = scanKey(tx.QueryRowContext(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = ?`, id))
		if err != nil {
			return notFound(err, "key not found")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // already revoked: nothing changed
		}
		return recordChange(ctx, tx, "key", id, db.nowMS())
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

func scanKey(s rowScanner) (*control.APIKey, error) {
	var k control.APIKey
	var scopes string
	var legacy int
	if err := s.Scan(&k.ID, &k.WorkspaceID, &k.Name, &k.Hash, &scopes, &legacy, &k.ExpiresAt, &k.RevokedAt, &k.CreatedAt); err != nil {
		return nil, err
	}
	k.Legacy = legacy != 0
	if err := json.Unmarshal([]byte(scopes), &k.Scopes); err != nil {
		return nil, fmt.Errorf("sqlite: key scopes: %w", err)
	}
	return &k, nil
}

const tokenCols = `id, hash, workspace_id, key_id, voice_ids, expires_at, consumed_at, created_at`

// CreateToken inserts t.
func (db *DB) CreateToken(ctx context.Context, t *control.AccessToken) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	t.SetDefaults(db.nowMS())
	voices, err := json.Marshal(control.NonNil(t.VoiceIDs))
	if err != nil {
		return err
	}
	return db.update(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO access_tokens (`+tokenCols+`) VALUES (?,?,?,?,?,?,?,?)`,
			t.ID, t.Hash, t.WorkspaceID, t.KeyID, string(voices), t.ExpiresAt, t.ConsumedAt, t.CreatedAt)
		if err != nil {
			return fmt.Errorf("sqlite: insert token: %w", err)
		}
		return nil
	})
}

// GetTokenByHash returns ETokenInvalid when unknown.
func (db *DB) GetTokenByHash(ctx context.Context, hash []byte) (_ *control.AccessToken, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var t control.AccessToken
	var voices string
	err = db.st.tokenByHash.QueryRowContext(ctx, hash).
		Scan(&t.ID, &t.Hash, &t.WorkspaceID, &t.KeyID, &voices, &t.ExpiresAt, &t.ConsumedAt, &t.CreatedAt)
	if err == sql.ErrNoRows {
		return nil, control.Errorf(control.ETokenInvalid, "access token unknown, expired or used")
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(voices), &t.VoiceIDs); err != nil {
		return nil, fmt.Errorf("sqlite: token voices: %w", err)
	}
	return &t, nil
}

// ConsumeToken marks the token used with one conditional UPDATE, so that of
// concurrent consumers exactly one sees a row affected.
func (db *DB) ConsumeToken(ctx context.Context, hash []byte, now int64) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	// One autocommit statement: it holds the write lock from its first
	// step, so no explicit transaction is needed for the check and the set.
	if _, err := db.startWrite(ctx); err != nil {
		return err
	}
	defer db.endWrite()
	res, err := db.st.consumeToken.ExecContext(ctx, now, hash, now)
	if err != nil {
		return fmt.Errorf("sqlite: consume token: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return control.Errorf(control.ETokenInvalid, "access token unknown, expired or used")
	}
	return nil
}

func ptr[T any](v T) *T { return &v }

func nullBool(b *bool) any {
	if b == nil {
		return nil
	}
	return boolInt(*b)
}

func nullInt64(v *int64) any {
	if v == nil {
		return nil
	}
	return *v
}

func nullInt(v *int) any {
	if v == nil {
		return nil
	}
	return int64(*v)
}

func intPtr(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	return ptr(int(v.Int64))
}

// ListWorkspaces returns every workspace, oldest first (voicesvc admin
// workspace list).
func (db *DB) ListWorkspaces(ctx context.Context) (_ []*control.Workspace, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.read.QueryContext(ctx, `SELECT `+workspaceCols+` FROM workspaces ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list workspaces: %w", err)
	}
	defer rows.Close()
	out := []*control.Workspace{}
	for rows.Next() {
		w, err := scanWorkspace(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list workspaces: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}
