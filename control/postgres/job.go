package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

const jobCols = `id, voice_id, org_id, job_type, status, progress, error, attempts, lease_owner, lease_until, created_at, updated_at`

// StartEnrollment moves voice v from draft or failed to processing, records
// consent, and stores the pending job and its clip, all in one transaction.
func (db *DB) StartEnrollment(ctx context.Context, v *control.Voice, create bool, job *control.Job, clip *control.Clip) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx pgx.Tx) error {
		now := db.nowMS()
		if create {
			v.Status = control.VoiceDraft
			if err := db.insertVoice(ctx, tx, v); err != nil {
				return err
			}
		}
		stored, err := scanVoice(tx.QueryRow(ctx, `UPDATE voices SET status = 'processing', consent_at = $1,
			consent_key_id = $2, updated_at = $3 WHERE id = $4 AND org_id = $5 AND status IN ('draft', 'failed')
			RETURNING `+voiceCols, v.ConsentAt, v.ConsentKeyID, now, v.ID, v.OrgID))
		if errors.Is(err, pgx.ErrNoRows) {
			var status string
			err := tx.QueryRow(ctx, `SELECT status FROM voices WHERE id = $1 AND org_id = $2`, v.ID, v.OrgID).Scan(&status)
			if err != nil {
				return notFound(err, "voice not found")
			}
			return control.Errorf(control.EVoiceBusy, "voice is %s", status)
		}
		if err != nil {
			return fmt.Errorf("postgres: start enrollment: %w", err)
		}
		*v = *stored
		job.MakePending(v, now)
		if err := insertJob(ctx, tx, job); err != nil {
			return err
		}
		clip.JobID = job.ID
		_, err = tx.Exec(ctx, `INSERT INTO clips (job_id, data, filename, language, ref_text) VALUES ($1,$2,$3,$4,$5)`,
			clip.JobID, clip.Data, clip.Filename, clip.Language, clip.RefText)
		if err != nil {
			return fmt.Errorf("postgres: insert clip: %w", err)
		}
		return db.recordChange(ctx, tx, "voice", v.ID, now)
	})
}

func insertJob(ctx context.Context, tx pgx.Tx, j *control.Job) error {
	_, err := tx.Exec(ctx, `INSERT INTO jobs (`+jobCols+`) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12)`,
		j.ID, j.VoiceID, j.OrgID, j.JobType, j.Status, j.Progress, nil, j.Attempts, j.LeaseOwner, j.LeaseUntil,
		j.CreatedAt, j.UpdatedAt)
	if err != nil {
		return fmt.Errorf("postgres: insert job: %w", err)
	}
	return nil
}

// scanJob reads a row of jobCols, then the row's further columns into
// more; pgx decodes the jsonb error (NULL: nil).
func scanJob(row pgx.Row, more ...any) (*control.Job, error) {
	var j control.Job
	err := row.Scan(append([]any{&j.ID, &j.VoiceID, &j.OrgID, &j.JobType, &j.Status, &j.Progress, &j.Error,
		&j.Attempts, &j.LeaseOwner, &j.LeaseUntil, &j.CreatedAt, &j.UpdatedAt}, more...)...)
	if err != nil {
		return nil, err
	}
	return &j, nil
}

// findJob returns the job the query's tail (a WHERE clause and what
// follows) selects. ENotFound.
func findJob(ctx context.Context, q querier, tail string, args ...any) (*control.Job, error) {
	j, err := scanJob(q.QueryRow(ctx, `SELECT `+jobCols+` FROM jobs `+tail, args...))
	if err != nil {
		return nil, notFound(err, "job not found")
	}
	return j, nil
}

// GetJob returns ENotFound for an unknown id.
func (db *DB) GetJob(ctx context.Context, id string) (_ *control.Job, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return findJob(ctx, db.pool, `WHERE id = $1`, id)
}

// ClaimJob takes the oldest pending job, or a running one whose lease
// lapsed, with its clip, in one statement. SKIP LOCKED lets concurrent
// claimers on any server pass over a row another is taking instead of
// waiting for it and claiming it twice.
func (db *DB) ClaimJob(ctx context.Context, owner string, lease time.Duration) (_ *control.Job, _ *control.Clip, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.nowMS()
	var clip control.Clip
	var hasClip bool
	job, err := scanJob(db.pool.QueryRow(ctx, `WITH claimed AS (
			UPDATE jobs SET status = 'running', lease_owner = $1, lease_until = $2, attempts = attempts + 1, updated_at = $3
			WHERE id = (SELECT id FROM jobs WHERE status = 'pending' OR (status = 'running' AND lease_until < $3)
				ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING `+jobCols+`)
		SELECT claimed.*, c.job_id IS NOT NULL, c.data, coalesce(c.filename, ''), coalesce(c.language, ''),
			coalesce(c.ref_text, '')
		FROM claimed LEFT JOIN clips c ON c.job_id = claimed.id`, owner, now+lease.Milliseconds(), now),
		&hasClip, &clip.Data, &clip.Filename, &clip.Language, &clip.RefText)
	if err != nil {
		return nil, nil, notFound(err, "no job to claim")
	}
	if !hasClip {
		return job, nil, nil // the worker fails such a job
	}
	clip.JobID = job.ID
	return job, &clip, nil
}

// ReportProgress renews the lease and sets progress. ENotFound when the job
// is not running under owner.
func (db *DB) ReportProgress(ctx context.Context, jobID, owner string, progress int, lease time.Duration) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	now := db.nowMS()
	res, err := db.pool.Exec(ctx, `UPDATE jobs SET progress = $1, lease_until = $2, updated_at = $3
		WHERE id = $4 AND lease_owner = $5 AND status = 'running'`, progress, now+lease.Milliseconds(), now, jobID, owner)
	if err != nil {
		return fmt.Errorf("postgres: report progress: %w", err)
	}
	if res.RowsAffected() == 0 {
		return control.Errorf(control.ENotFound, "job not running for this worker")
	}
	return nil
}

// SucceedJob ends the job and makes its voice ready. A second call for a
// succeeded job is a no-op, so an at-least-once worker may repeat it.
func (db *DB) SucceedJob(ctx context.Context, jobID, owner string, profile []byte, sampleURL string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.finishJob(ctx, jobID, owner, control.JobSucceeded, func(tx pgx.Tx, j *control.Job, now int64) error {
		_, err := tx.Exec(ctx, `UPDATE voices SET status = 'ready', profile = $1,
			sample_audio_url = CASE WHEN $2 <> '' THEN $3 ELSE sample_audio_url END, updated_at = $4 WHERE id = $5`,
			profile, sampleURL, sampleURL, now, j.VoiceID)
		return err
	}, nil)
}

// FailJob ends the job with jerr and makes its voice failed.
func (db *DB) FailJob(ctx context.Context, jobID, owner string, jerr control.JobError) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.finishJob(ctx, jobID, owner, control.JobFailed, func(tx pgx.Tx, j *control.Job, now int64) error {
		_, err := tx.Exec(ctx, `UPDATE voices SET status = 'failed', updated_at = $1 WHERE id = $2`, now, j.VoiceID)
		return err
	}, &jerr)
}

// finishJob moves a job owned by owner to the terminal status, runs voice to
// update its voice, and deletes the clip. Finishing again with the same
// status is a no-op.
func (db *DB) finishJob(ctx context.Context, jobID, owner, status string,
	voice func(pgx.Tx, *control.Job, int64) error, jerr *control.JobError) error {
	return db.update(ctx, func(tx pgx.Tx) error {
		j, err := findJob(ctx, tx, `WHERE id = $1 FOR UPDATE`, jobID)
		if err != nil {
			return err
		}
		now := db.nowMS()
		if changed, err := j.Finish(owner, status, jerr, now); !changed {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET status = $1, progress = $2, error = $3, updated_at = $4 WHERE id = $5`,
			j.Status, j.Progress, j.Error, now, jobID); err != nil {
			return fmt.Errorf("postgres: finish job: %w", err)
		}
		if err := voice(tx, j, now); err != nil {
			return fmt.Errorf("postgres: finish job voice: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM clips WHERE job_id = $1`, jobID); err != nil {
			return fmt.Errorf("postgres: delete clip: %w", err)
		}
		return db.recordChange(ctx, tx, "voice", j.VoiceID, now)
	})
}

// ExpireJobs ends jobs pending since before cutoff as expired, fails their
// voices and drops their clips, a few statements whatever their number.
func (db *DB) ExpireJobs(ctx context.Context, cutoff int64) (_ int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var n int
	err = db.update(ctx, func(tx pgx.Tx) error {
		now := db.nowMS()
		rows, err := tx.Query(ctx, `UPDATE jobs SET status = 'expired', error = $1, updated_at = $2
			WHERE id IN (SELECT id FROM jobs WHERE status = 'pending' AND created_at < $3 FOR UPDATE SKIP LOCKED)
			RETURNING id, voice_id`, &control.JobExpiredError, now, cutoff)
		if err != nil {
			return fmt.Errorf("postgres: expire jobs: %w", err)
		}
		expired, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Job, Voice string }])
		if err != nil {
			return fmt.Errorf("postgres: expire jobs: %w", err)
		}
		if len(expired) == 0 {
			return nil
		}
		jobs, voices := make([]string, len(expired)), make([]string, len(expired))
		for i, e := range expired {
			jobs[i], voices[i] = e.Job, e.Voice
		}
		if _, err := tx.Exec(ctx, `UPDATE voices SET status = 'failed', updated_at = $1
			WHERE id = ANY($2) AND status = 'processing'`, now, voices); err != nil {
			return fmt.Errorf("postgres: expire voices: %w", err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM clips WHERE job_id = ANY($1)`, jobs); err != nil {
			return fmt.Errorf("postgres: delete clips: %w", err)
		}
		for _, id := range voices {
			if err := db.recordChange(ctx, tx, "voice", id, now); err != nil {
				return err
			}
		}
		n = len(expired)
		return nil
	})
	return n, err
}
