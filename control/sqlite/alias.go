package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"voicesvc/control"
)

// SetVoiceAliases replaces ws's aliases of voiceID in one write transaction
// (SQLite has one writer, so the check for a taken alias and the insert
// cannot interleave with another). EInvalidRequest, EAliasTaken, ENotFound.
func (db *DB) SetVoiceAliases(ctx context.Context, ws, voiceID string, aliases []string) (_ []string, err error) {
	list, err := control.ValidateAliases(aliases)
	if err != nil {
		return nil, err
	}
	ctx, end := db.call(ctx)
	defer end(&err)
	err = db.update(ctx, func(tx *sql.Tx) error {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM voices WHERE id = ? AND (org_id = ? OR visibility = 'public')`,
			voiceID, ws).Scan(&one)
		if err != nil {
			return notFound(err, "voice not found")
		}
		if taken, err := aliasTaken(ctx, tx, ws, voiceID, list); err != nil || taken != "" {
			if err == nil {
				err = control.AliasTaken(taken)
			}
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM voice_aliases WHERE workspace_id = ? AND voice_id = ?`, ws, voiceID); err != nil {
			return fmt.Errorf("sqlite: delete aliases: %w", err)
		}
		now := db.nowMS()
		for i, a := range list {
			if _, err := tx.ExecContext(ctx, `INSERT INTO voice_aliases (workspace_id, alias, voice_id, position, created_at)
				VALUES (?, ?, ?, ?, ?)`, ws, a, voiceID, i, now); err != nil {
				return fmt.Errorf("sqlite: insert alias: %w", err)
			}
		}
		return recordChange(ctx, tx, control.ChangeAlias, ws, now)
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// aliasTaken returns the first of list that another voice of ws holds, or "".
func aliasTaken(ctx context.Context, tx *sql.Tx, ws, voiceID string, list []string) (string, error) {
	if len(list) == 0 {
		return "", nil
	}
	args := make([]any, 0, len(list)+2)
	args = append(args, ws, voiceID)
	for _, a := range list {
		args = append(args, a)
	}
	rows, err := tx.QueryContext(ctx, `SELECT alias FROM voice_aliases WHERE workspace_id = ? AND voice_id <> ?
		AND alias IN (?`+strings.Repeat(",?", len(list)-1)+`)`, args...)
	if err != nil {
		return "", fmt.Errorf("sqlite: taken aliases: %w", err)
	}
	defer rows.Close()
	taken := map[string]bool{}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return "", err
		}
		taken[a] = true
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	for _, a := range list {
		if taken[a] {
			return a, nil
		}
	}
	return "", nil
}

// ListVoiceAliases returns ws's aliases of voiceID in the order set.
func (db *DB) ListVoiceAliases(ctx context.Context, ws, voiceID string) (_ []string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.read.QueryContext(ctx, `SELECT alias FROM voice_aliases WHERE voice_id = ? AND workspace_id = ?
		ORDER BY position, alias`, voiceID, ws)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list aliases: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ResolveVoiceAlias returns the voice id ws calls alias. ENotFound.
func (db *DB) ResolveVoiceAlias(ctx context.Context, ws, alias string) (_ string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var id string
	if err := db.st.aliasResolve.QueryRowContext(ctx, ws, alias).Scan(&id); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return "", control.Errorf(control.ENotFound, "alias %q not found", alias)
		}
		return "", err
	}
	return id, nil
}

// WorkspaceAliases returns every alias of ws by voice id.
func (db *DB) WorkspaceAliases(ctx context.Context, ws string) (_ map[string][]string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.read.QueryContext(ctx, `SELECT voice_id, alias FROM voice_aliases WHERE workspace_id = ?
		ORDER BY voice_id, position, alias`, ws)
	if err != nil {
		return nil, fmt.Errorf("sqlite: workspace aliases: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var id, a string
		if err := rows.Scan(&id, &a); err != nil {
			return nil, err
		}
		out[id] = append(out[id], a)
	}
	return out, rows.Err()
}

// aliasChangesFor records an "alias" change for every workspace that
// aliased one of the voices ids, before they are deleted (their aliases go
// with them, by the foreign key).
func aliasChangesFor(ctx context.Context, tx *sql.Tx, now int64, ids ...string) error {
	for _, id := range ids {
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT workspace_id FROM voice_aliases WHERE voice_id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: aliasing workspaces: %w", err)
		}
		var wss []string
		for rows.Next() {
			var ws string
			if err := rows.Scan(&ws); err != nil {
				rows.Close()
				return err
			}
			wss = append(wss, ws)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, ws := range wss {
			if err := recordChange(ctx, tx, control.ChangeAlias, ws, now); err != nil {
				return err
			}
		}
	}
	return nil
}
