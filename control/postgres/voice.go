package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

const voiceCols = `id, org_id, name, description, status, clone_method, visibility, primary_language, labels,
	settings, sample_audio_url, base_voice_id, alias, profile, consent_at, consent_key_id, created_at, updated_at, engine`

// CreateVoice inserts v, filling its id and timestamps when empty.
func (db *DB) CreateVoice(ctx context.Context, v *control.Voice) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx pgx.Tx) error { return db.insertVoice(ctx, tx, v) })
}

func (db *DB) insertVoice(ctx context.Context, tx pgx.Tx, v *control.Voice) error {
	v.SetDefaults(db.nowMS())
	labels, settings, err := control.VoiceJSON(v)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO voices (`+voiceCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19)`,
		v.ID, v.OrgID, v.Name, v.Description, v.Status, v.CloneMethod, v.Visibility, v.PrimaryLanguage,
		labels, settings, v.SampleAudioURL, v.BaseVoiceID, v.Alias, v.Profile, v.ConsentAt, v.ConsentKeyID,
		v.CreatedAt, v.UpdatedAt, v.Engine)
	if err != nil {
		return fmt.Errorf("postgres: insert voice: %w", err)
	}
	return nil
}

// scanVoice reads a row of voiceCols; pgx decodes the jsonb columns (a
// NULL settings stays nil).
func scanVoice(row pgx.Row) (*control.Voice, error) {
	var v control.Voice
	err := row.Scan(&v.ID, &v.OrgID, &v.Name, &v.Description, &v.Status, &v.CloneMethod, &v.Visibility,
		&v.PrimaryLanguage, &v.Labels, &v.Settings, &v.SampleAudioURL, &v.BaseVoiceID, &v.Alias, &v.Profile,
		&v.ConsentAt, &v.ConsentKeyID, &v.CreatedAt, &v.UpdatedAt, &v.Engine)
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// findVoice returns the first voice the query's tail (a WHERE clause and
// what follows) selects. ENotFound.
func findVoice(ctx context.Context, q querier, tail string, args ...any) (*control.Voice, error) {
	v, err := scanVoice(q.QueryRow(ctx, `SELECT `+voiceCols+` FROM voices `+tail, args...))
	if err != nil {
		return nil, notFound(err, "voice not found")
	}
	return v, nil
}

// GetVoice returns any voice by id. ENotFound.
func (db *DB) GetVoice(ctx context.Context, id string) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return findVoice(ctx, db.pool, `WHERE id = $1`, id)
}

// GetVoiceByAlias returns a public voice by alias. ENotFound.
func (db *DB) GetVoiceByAlias(ctx context.Context, alias string) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	if alias == "" {
		return nil, control.Errorf(control.ENotFound, "voice not found")
	}
	return findVoice(ctx, db.pool, `WHERE alias = $1 AND visibility = 'public' ORDER BY created_at, id LIMIT 1`, alias)
}

// ListVoices returns the workspace's own voices (newest first), then ready
// public voices of other workspaces (by alias), paged, and the total.
func (db *DB) ListVoices(ctx context.Context, f control.VoiceFilter) (_ []*control.Voice, _ int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	where := []string{`(org_id = $1 OR (visibility = 'public' AND status = 'ready'))`}
	args := []any{f.WorkspaceID}
	for _, c := range []struct{ col, val string }{
		{"visibility", f.Visibility}, {"status", f.Status}, {"primary_language", f.Language},
	} {
		if c.val != "" {
			args = append(args, c.val)
			where = append(where, fmt.Sprintf("%s = $%d", c.col, len(args)))
		}
	}
	cond := strings.Join(where, " AND ")
	offset, limit := control.ListPage(f)
	var total int
	if err := db.pool.QueryRow(ctx, `SELECT COUNT(*) FROM voices WHERE `+cond, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("postgres: count voices: %w", err)
	}
	n := len(args)
	rows, err := db.pool.Query(ctx, `SELECT `+voiceCols+` FROM voices WHERE `+cond+`
		ORDER BY CASE WHEN org_id = $1 THEN 0 ELSE 1 END,
			CASE WHEN org_id = $1 THEN created_at ELSE 0 END DESC, alias, id
		LIMIT $`+fmt.Sprint(n+1)+` OFFSET $`+fmt.Sprint(n+2), append(args, limit, offset)...)
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list voices: %w", err)
	}
	voices, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*control.Voice, error) { return scanVoice(r) })
	if err != nil {
		return nil, 0, fmt.Errorf("postgres: list voices: %w", err)
	}
	return voices, total, nil
}

// UpdateVoice changes a voice of workspace ws. ENotFound.
func (db *DB) UpdateVoice(ctx context.Context, ws, id string, upd control.VoiceUpdate) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var v *control.Voice
	err = db.update(ctx, func(tx pgx.Tx) error {
		var err error
		if v, err = findVoice(ctx, tx, `WHERE id = $1 AND org_id = $2`, id, ws); err != nil {
			return err
		}
		v.Apply(upd)
		v.UpdatedAt = db.nowMS()
		if err := writeVoice(ctx, tx, v); err != nil {
			return err
		}
		return db.recordChange(ctx, tx, "voice", id, v.UpdatedAt)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// writeVoice stores every mutable column of v.
func writeVoice(ctx context.Context, tx pgx.Tx, v *control.Voice) error {
	labels, settings, err := control.VoiceJSON(v)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE voices SET name=$1, description=$2, status=$3, clone_method=$4, visibility=$5,
		primary_language=$6, labels=$7, settings=$8, sample_audio_url=$9, base_voice_id=$10, alias=$11, profile=$12,
		updated_at=$13, engine=$14 WHERE id=$15`,
		v.Name, v.Description, v.Status, v.CloneMethod, v.Visibility, v.PrimaryLanguage, labels, settings,
		v.SampleAudioURL, v.BaseVoiceID, v.Alias, v.Profile, v.UpdatedAt, v.Engine, v.ID)
	if err != nil {
		return fmt.Errorf("postgres: update voice: %w", err)
	}
	return nil
}

// DeleteVoice removes a voice of ws, cancels its live jobs and drops their
// clips. ENotFound.
func (db *DB) DeleteVoice(ctx context.Context, ws, id string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx pgx.Tx) error {
		// Lock the row first: a SetVoiceAliases holding it share-locked
		// commits before the aliasing workspaces are read.
		var one int
		if err := tx.QueryRow(ctx, `SELECT 1 FROM voices WHERE id = $1 AND org_id = $2 FOR UPDATE`, id, ws).Scan(&one); err != nil {
			return notFound(err, "voice not found")
		}
		now := db.nowMS()
		if err := db.aliasChangesFor(ctx, tx, now, []string{id}); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM voices WHERE id = $1 AND org_id = $2`, id, ws)
		if err != nil {
			return fmt.Errorf("postgres: delete voice: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return control.Errorf(control.ENotFound, "voice not found")
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'cancelled', updated_at = $1
			WHERE voice_id = $2 AND status IN ('pending', 'running')`, now, id); err != nil {
			return fmt.Errorf("postgres: cancel jobs: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM clips WHERE job_id IN (SELECT id FROM jobs WHERE voice_id = $1)`, id); err != nil {
			return fmt.Errorf("postgres: delete clips: %w", err)
		}
		return db.recordChange(ctx, tx, "voice", id, now)
	})
}

// SeedCatalog makes catalogWS own exactly voices, matched by alias, creating
// the catalog workspace when missing.
func (db *DB) SeedCatalog(ctx context.Context, catalogWS string, voices []*control.Voice) (err error) {
	ctx, end := db.callWithin(ctx, max(db.timeout, seedTimeout))
	defer end(&err)
	return db.update(ctx, func(tx pgx.Tx) error {
		// Servers starting together would otherwise insert an alias twice.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockSeed); err != nil {
			return fmt.Errorf("postgres: seed lock: %w", err)
		}
		now := db.nowMS()
		if _, err := tx.Exec(ctx, `INSERT INTO workspaces (id, name, plan, created_at, updated_at)
			VALUES ($1, 'catalog', 'enterprise', $2, $3) ON CONFLICT (id) DO NOTHING`, catalogWS, now, now); err != nil {
			return fmt.Errorf("postgres: catalog workspace: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+voiceCols+` FROM voices WHERE org_id = $1`, catalogWS)
		if err != nil {
			return err
		}
		existing, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*control.Voice, error) { return scanVoice(r) })
		if err != nil {
			return err
		}
		plan := control.PlanCatalog(catalogWS, existing, voices, now)
		if err := plan.Write(func(v *control.Voice) error { return db.insertVoice(ctx, tx, v) },
			func(v *control.Voice) error { return writeVoice(ctx, tx, v) }); err != nil {
			return err
		}
		if len(plan.Delete) > 0 {
			ids := make([]string, len(plan.Delete))
			for i, v := range plan.Delete {
				ids[i] = v.ID
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM voices WHERE id = ANY($1) FOR UPDATE`, ids); err != nil {
				return fmt.Errorf("postgres: lock catalog voices: %w", err)
			}
			if err := db.aliasChangesFor(ctx, tx, now, ids); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM voices WHERE id = ANY($1)`, ids); err != nil {
				return fmt.Errorf("postgres: drop catalog voices: %w", err)
			}
		}
		for _, id := range plan.Changed() {
			if err := db.recordChange(ctx, tx, "voice", id, now); err != nil {
				return err
			}
		}
		return nil
	})
}
