package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"voicesvc/control"
)

const voiceCols = `id, org_id, name, description, status, clone_method, visibility, primary_language, labels,
	settings, sample_audio_url, base_voice_id, alias, profile, consent_at, consent_key_id, created_at, updated_at, engine`

// CreateVoice inserts v, filling its id and timestamps when empty.
func (db *DB) CreateVoice(ctx context.Context, v *control.Voice) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error { return db.insertVoice(ctx, tx, v) })
}

func (db *DB) insertVoice(ctx context.Context, tx *sql.Tx, v *control.Voice) error {
	v.SetDefaults(db.nowMS())
	labels, settings, err := control.VoiceJSON(v)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO voices (`+voiceCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		v.ID, v.OrgID, v.Name, v.Description, v.Status, v.CloneMethod, v.Visibility, v.PrimaryLanguage,
		labels, settings, v.SampleAudioURL, v.BaseVoiceID, v.Alias, v.Profile, v.ConsentAt, v.ConsentKeyID,
		v.CreatedAt, v.UpdatedAt, v.Engine)
	if err != nil {
		return fmt.Errorf("sqlite: insert voice: %w", err)
	}
	return nil
}

func scanVoice(s rowScanner) (*control.Voice, error) {
	var v control.Voice
	var labels string
	var settings sql.NullString
	if err := s.Scan(&v.ID, &v.OrgID, &v.Name, &v.Description, &v.Status, &v.CloneMethod, &v.Visibility,
		&v.PrimaryLanguage, &labels, &settings, &v.SampleAudioURL, &v.BaseVoiceID, &v.Alias, &v.Profile,
		&v.ConsentAt, &v.ConsentKeyID, &v.CreatedAt, &v.UpdatedAt, &v.Engine); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(labels), &v.Labels); err != nil {
		return nil, fmt.Errorf("sqlite: voice labels: %w", err)
	}
	if settings.Valid {
		v.Settings = new(control.VoiceSettings)
		if err := json.Unmarshal([]byte(settings.String), v.Settings); err != nil {
			return nil, fmt.Errorf("sqlite: voice settings: %w", err)
		}
	}
	return &v, nil
}

// GetVoice returns any voice by id. ENotFound.
func (db *DB) GetVoice(ctx context.Context, id string) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	v, err := scanVoice(db.st.voiceByID.QueryRowContext(ctx, id))
	if err != nil {
		return nil, notFound(err, "voice not found")
	}
	return v, nil
}

// GetVoiceByAlias returns a public voice by alias. ENotFound.
func (db *DB) GetVoiceByAlias(ctx context.Context, alias string) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	if alias == "" {
		return nil, control.Errorf(control.ENotFound, "voice not found")
	}
	v, err := scanVoice(db.st.voiceByAlias.QueryRowContext(ctx, alias))
	if err != nil {
		return nil, notFound(err, "voice not found")
	}
	return v, nil
}

// ListVoices returns the workspace's own voices (newest first), then ready
// public voices of other workspaces (by alias), paged, and the total.
func (db *DB) ListVoices(ctx context.Context, f control.VoiceFilter) (_ []*control.Voice, _ int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	where := []string{`(org_id = ? OR (visibility = 'public' AND status = 'ready'))`}
	args := []any{f.WorkspaceID}
	for _, c := range []struct{ col, val string }{
		{"visibility", f.Visibility}, {"status", f.Status}, {"primary_language", f.Language},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	cond := strings.Join(where, " AND ")
	offset, limit := control.ListPage(f)
	var voices []*control.Voice
	var total int
	err = db.view(ctx, func(tx *sql.Tx) error {
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM voices WHERE `+cond, args...).Scan(&total); err != nil {
			return err
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+voiceCols+` FROM voices WHERE `+cond+`
			ORDER BY CASE WHEN org_id = ? THEN 0 ELSE 1 END,
				CASE WHEN org_id = ? THEN created_at ELSE 0 END DESC, alias, id
			LIMIT ? OFFSET ?`, append(args, f.WorkspaceID, f.WorkspaceID, limit, offset)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			v, err := scanVoice(rows)
			if err != nil {
				return err
			}
			voices = append(voices, v)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("sqlite: list voices: %w", err)
	}
	return voices, total, nil
}

// UpdateVoice changes a voice of workspace ws. ENotFound.
func (db *DB) UpdateVoice(ctx context.Context, ws, id string, upd control.VoiceUpdate) (_ *control.Voice, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var v *control.Voice
	err = db.update(ctx, func(tx *sql.Tx) error {
		var err error
		v, err = scanVoice(tx.QueryRowContext(ctx, `SELECT `+voiceCols+` FROM voices WHERE id = ? AND org_id = ?`, id, ws))
		if err != nil {
			return notFound(err, "voice not found")
		}
		v.Apply(upd)
		v.UpdatedAt = db.nowMS()
		if err := writeVoice(ctx, tx, v); err != nil {
			return err
		}
		return recordChange(ctx, tx, "voice", id, v.UpdatedAt)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// writeVoice stores every mutable column of v.
func writeVoice(ctx context.Context, tx *sql.Tx, v *control.Voice) error {
	labels, settings, err := control.VoiceJSON(v)
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE voices SET name=?, description=?, status=?, clone_method=?, visibility=?,
		primary_language=?, labels=?, settings=?, sample_audio_url=?, base_voice_id=?, alias=?, profile=?,
		updated_at=?, engine=? WHERE id=?`,
		v.Name, v.Description, v.Status, v.CloneMethod, v.Visibility, v.PrimaryLanguage, labels, settings,
		v.SampleAudioURL, v.BaseVoiceID, v.Alias, v.Profile, v.UpdatedAt, v.Engine, v.ID)
	if err != nil {
		return fmt.Errorf("sqlite: update voice: %w", err)
	}
	return nil
}

// DeleteVoice removes a voice of ws, cancels its live jobs and drops their
// clips. ENotFound.
func (db *DB) DeleteVoice(ctx context.Context, ws, id string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		if err := aliasChangesFor(ctx, tx, now, id); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM voices WHERE id = ? AND org_id = ?`, id, ws)
		if err != nil {
			return fmt.Errorf("sqlite: delete voice: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return control.Errorf(control.ENotFound, "voice not found")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = 'cancelled', updated_at = ?
			WHERE voice_id = ? AND status IN ('pending', 'running')`, now, id); err != nil {
			return fmt.Errorf("sqlite: cancel jobs: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM clips WHERE job_id IN (SELECT id FROM jobs WHERE voice_id = ?)`, id); err != nil {
			return fmt.Errorf("sqlite: delete clips: %w", err)
		}
		return recordChange(ctx, tx, "voice", id, now)
	})
}

// SeedCatalog makes catalogWS own exactly voices, matched by alias, creating
// the catalog workspace when missing.
func (db *DB) SeedCatalog(ctx context.Context, catalogWS string, voices []*control.Voice) (err error) {
	ctx, end := db.callWithin(ctx, max(db.timeout, seedTimeout))
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		if _, err := tx.ExecContext(ctx, `INSERT INTO workspaces (id, name, plan, created_at, updated_at)
			VALUES (?, 'catalog', 'enterprise', ?, ?) ON CONFLICT (id) DO NOTHING`, catalogWS, now, now); err != nil {
			return fmt.Errorf("sqlite: catalog workspace: %w", err)
		}
		existing, err := voicesOf(ctx, tx, catalogWS)
		if err != nil {
			return err
		}
		plan := control.PlanCatalog(catalogWS, existing, voices, now)
		if err := plan.Write(func(v *control.Voice) error { return db.insertVoice(ctx, tx, v) },
			func(v *control.Voice) error { return writeVoice(ctx, tx, v) }); err != nil {
			return err
		}
		for _, v := range plan.Delete {
			if err := aliasChangesFor(ctx, tx, now, v.ID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM voices WHERE id = ?`, v.ID); err != nil {
				return fmt.Errorf("sqlite: drop catalog voice: %w", err)
			}
		}
		for _, id := range plan.Changed() {
			if err := recordChange(ctx, tx, "voice", id, now); err != nil {
				return err
			}
		}
		return nil
	})
}

// voicesOf returns every voice of workspace ws.
func voicesOf(ctx context.Context, tx *sql.Tx, ws string) ([]*control.Voice, error) {
	rows, err := tx.QueryContext(ctx, `SELECT `+voiceCols+` FROM voices WHERE org_id = ?`, ws)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*control.Voice
	for rows.Next() {
		v, err := scanVoice(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
