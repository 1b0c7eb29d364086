package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"voicesvc/control"
)

// SetVoiceAliases replaces ws's aliases of voiceID in one transaction.
// Writers of one workspace's aliases serialize on the workspace's advisory
// lock, so the check for a taken alias and the insert cannot interleave;
// the voice row is share-locked so that it cannot be deleted meanwhile.
// EInvalidRequest, EAliasTaken, ENotFound.
func (db *DB) SetVoiceAliases(ctx context.Context, ws, voiceID string, aliases []string) (_ []string, err error) {
	list, err := control.ValidateAliases(aliases)
	if err != nil {
		return nil, err
	}
	ctx, end := db.call(ctx)
	defer end(&err)
	err = db.update(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('voicesvc/alias/' || $1, 0))`, ws); err != nil {
			return fmt.Errorf("postgres: alias lock: %w", err)
		}
		var one int
		err := tx.QueryRow(ctx, `SELECT 1 FROM voices WHERE id = $1 AND (org_id = $2 OR visibility = 'public')
			FOR KEY SHARE`, voiceID, ws).Scan(&one)
		if err != nil {
			return notFound(err, "voice not found")
		}
		rows, err := tx.Query(ctx, `SELECT alias FROM voice_aliases WHERE workspace_id = $1 AND voice_id <> $2
			AND alias = ANY($3)`, ws, voiceID, list)
		if err != nil {
			return fmt.Errorf("postgres: taken aliases: %w", err)
		}
		held, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("postgres: taken aliases: %w", err)
		}
		if len(held) > 0 {
			taken := map[string]bool{}
			for _, a := range held {
				taken[a] = true
			}
			for _, a := range list {
				if taken[a] {
					return control.AliasTaken(a)
				}
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM voice_aliases WHERE workspace_id = $1 AND voice_id = $2`, ws, voiceID); err != nil {
			return fmt.Errorf("postgres: delete aliases: %w", err)
		}
		now := db.nowMS()
		if len(list) > 0 {
			_, err := tx.Exec(ctx, `INSERT INTO voice_aliases (workspace_id, alias, voice_id, position, created_at)
				SELECT $1, a, $2, p - 1, $3 FROM unnest($4::text[]) WITH ORDINALITY AS t(a, p)`, ws, voiceID, now, list)
			var pe *pgconn.PgError
			if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation: cannot happen under the lock
				return control.AliasTaken(list[0])
			}
			if err != nil {
				return fmt.Errorf("postgres: insert aliases: %w", err)
			}
		}
		return db.recordChange(ctx, tx, control.ChangeAlias, ws, now)
	})
	if err != nil {
		return nil, err
	}
	return list, nil
}

// ListVoiceAliases returns ws's aliases of voiceID in the order set.
func (db *DB) ListVoiceAliases(ctx context.Context, ws, voiceID string) (_ []string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.pool.Query(ctx, `SELECT alias FROM voice_aliases WHERE voice_id = $1 AND workspace_id = $2
		ORDER BY position, alias`, voiceID, ws)
	if err != nil {
		return nil, fmt.Errorf("postgres: list aliases: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("postgres: list aliases: %w", err)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

// ResolveVoiceAlias returns the voice id ws calls alias. ENotFound.
func (db *DB) ResolveVoiceAlias(ctx context.Context, ws, alias string) (_ string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var id string
	err = db.pool.QueryRow(ctx, `SELECT voice_id FROM voice_aliases WHERE workspace_id = $1 AND alias = $2`,
		ws, alias).Scan(&id)
	if err != nil {
		return "", notFound(err, fmt.Sprintf("alias %q not found", alias))
	}
	return id, nil
}

// WorkspaceAliases returns every alias of ws by voice id.
func (db *DB) WorkspaceAliases(ctx context.Context, ws string) (_ map[string][]string, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	rows, err := db.pool.Query(ctx, `SELECT voice_id, alias FROM voice_aliases WHERE workspace_id = $1
		ORDER BY voice_id, position, alias`, ws)
	if err != nil {
		return nil, fmt.Errorf("postgres: workspace aliases: %w", err)
	}
	out := map[string][]string{}
	var id, a string
	_, err = pgx.ForEachRow(rows, []any{&id, &a}, func() error {
		out[id] = append(out[id], a)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: workspace aliases: %w", err)
	}
	return out, nil
}

// aliasChangesFor records an "alias" change for every workspace that
// aliased one of the voices ids, before they are deleted (their aliases go
// with them, by the foreign key). The caller holds the voices' rows locked,
// so no alias of them is added meanwhile.
func (db *DB) aliasChangesFor(ctx context.Context, tx pgx.Tx, now int64, ids []string) error {
	rows, err := tx.Query(ctx, `SELECT DISTINCT workspace_id FROM voice_aliases WHERE voice_id = ANY($1)`, ids)
	if err != nil {
		return fmt.Errorf("postgres: aliasing workspaces: %w", err)
	}
	wss, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("postgres: aliasing workspaces: %w", err)
	}
	for _, ws := range wss {
		if err := db.recordChange(ctx, tx, control.ChangeAlias, ws, now); err != nil {
			return err
		}
	}
	return nil
}
