package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"voicesvc/control"
)

const jobCols = `id, voice_id, org_id, job_type, status, progress, error, attempts, lease_owner, lease_until, created_at, updated_at`

// StartEnrollment moves voice v from draft or failed to processing, records
// consent, and stores the pending job and its clip, all in one transaction.
func (db *DB) StartEnrollment(ctx context.Context, v *control.Voice, create bool, job *control.Job, clip *control.Clip) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		if create {
			v.Status = control.VoiceDraft
			if err := db.insertVoice(ctx, tx, v); err != nil {
				return err
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE voices SET status = 'processing', consent_at = ?, consent_key_id = ?,
			updated_at = ? WHERE id = ? AND org_id = ? AND status IN ('draft', 'failed')`,
			v.ConsentAt, v.ConsentKeyID, now, v.ID, v.OrgID)
		if err != nil {
			return fmt.Errorf("sqlite: start enrollment: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM voices WHERE id = ? AND org_id = ?`, v.ID, v.OrgID).Scan(&status)
			if err != nil {
				return notFound(err, "voice not found")
			}
			return control.Errorf(control.EVoiceBusy, "voice is %s", status)
		}
		stored, err := scanVoice(tx.QueryRowContext(ctx, `SELECT `+voiceCols+` FROM voices WHERE id = ?`, v.ID))
		if err != nil {
			return err
		}
		*v = *stored
		job.MakePending(v, now)
		if err := insertJob(ctx, tx, job); err != nil {
			return err
		}
		clip.JobID = job.ID
		_, err = tx.ExecContext(ctx, `INSERT INTO clips (job_id, data, filename, language, ref_text) VALUES (?,?,?,?,?)`,
			clip.JobID, clip.Data, clip.Filename, clip.Language, clip.RefText)
		if err != nil {
			return fmt.Errorf("sqlite: insert clip: %w", err)
		}
		return recordChange(ctx, tx, "voice", v.ID, now)
	})
}

func insertJob(ctx context.Context, tx *sql.Tx, j *control.Job) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO jobs (`+jobCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
		j.ID, j.VoiceID, j.OrgID, j.JobType, j.Status, j.Progress, nil, j.Attempts, j.LeaseOwner, j.LeaseUntil,
		j.CreatedAt, j.UpdatedAt)
	if err != nil {
		return fmt.Errorf("sqlite: insert job: %w", err)
	}
	return nil
}

func scanJob(s rowScanner) (*control.Job, error) {
	var j control.Job
	var jerr sql.NullString
	if err := s.Scan(&j.ID, &j.VoiceID, &j.OrgID, &j.JobType, &j.Status, &j.Progress, &jerr, &j.Attempts,
		&j.LeaseOwner, &j.LeaseUntil, &j.CreatedAt, &j.UpdatedAt); err != nil {
		return nil, err
	}
	if jerr.Valid {
		j.Error = new(control.JobError)
		if err := json.Unmarshal([]byte(jerr.String), j.Error); err != nil {
			return nil, fmt.Errorf("sqlite: job error: %w", err)
		}
	}
	return &j, nil
}

// GetJob returns ENotFound for an unknown id.
func (db *DB) GetJob(ctx context.Context, id string) (_ *control.Job, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	j, err := scanJob(db.read.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id))
	if err != nil {
		return nil, notFound(err, "job not found")
	}
	return j, nil
}

// ClaimJob takes the oldest pending job, or a running one whose lease
// lapsed. The write transaction is IMMEDIATE, so two claimers in any
// processes never pick the same row.
func (db *DB) ClaimJob(ctx context.Context, owner string, lease time.Duration) (_ *control.Job, _ *control.Clip, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var job *control.Job
	var clip *control.Clip
	err = db.update(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		var id string
		err := tx.QueryRowContext(ctx, `SELECT id FROM jobs
			WHERE status = 'pending' OR (status = 'running' AND lease_until < ?)
			ORDER BY created_at, id LIMIT 1`, now).Scan(&id)
		if err != nil {
			return notFound(err, "no job to claim")
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = 'running', lease_owner = ?, lease_until = ?,
			attempts = attempts + 1, updated_at = ? WHERE id = ?`, owner, now+lease.Milliseconds(), now, id); err != nil {
			return fmt.Errorf("sqlite: claim job: %w", err)
		}
		if job, err = scanJob(tx.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, id)); err != nil {
			return err
		}
		clip = &control.Clip{JobID: id}
		err = tx.QueryRowContext(ctx, `SELECT data, filename, language, ref_text FROM clips WHERE job_id = ?`, id).
			Scan(&clip.Data, &clip.Filename, &clip.Language, &clip.RefText)
		if err == sql.ErrNoRows {
			clip = nil // the worker fails such a job
			return nil
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return job, clip, nil
}

// ReportProgress renews the lease and sets progress. ENotFound when the job
// is not running under owner.
func (db *DB) ReportProgress(ctx context.Context, jobID, owner string, progress int, lease time.Duration) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.update(ctx, func(tx *sql.Tx) error {
		now := db.nowMS()
		res, err := tx.ExecContext(ctx, `UPDATE jobs SET progress = ?, lease_until = ?, updated_at = ?
			WHERE id = ? AND lease_owner = ? AND status = 'running'`, progress, now+lease.Milliseconds(), now, jobID, owner)
		if err != nil {
			return fmt.Errorf("sqlite: report progress: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return control.Errorf(control.ENotFound, "job not running for this worker")
		}
		return nil
	})
}

// SucceedJob ends the job and makes its voice ready. A second call for a
// succeeded job is a no-op, so an at-least-once worker may repeat it.
func (db *DB) SucceedJob(ctx context.Context, jobID, owner string, profile []byte, sampleURL string) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.finishJob(ctx, jobID, owner, control.JobSucceeded, func(tx *sql.Tx, j *control.Job, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE voices SET status = 'ready', profile = ?,
			sample_audio_url = CASE WHEN ? <> '' THEN ? ELSE sample_audio_url END, updated_at = ? WHERE id = ?`,
			profile, sampleURL, sampleURL, now, j.VoiceID)
		return err
	}, nil)
}

// FailJob ends the job with jerr and makes its voice failed.
func (db *DB) FailJob(ctx context.Context, jobID, owner string, jerr control.JobError) (err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	return db.finishJob(ctx, jobID, owner, control.JobFailed, func(tx *sql.Tx, j *control.Job, now int64) error {
		_, err := tx.ExecContext(ctx, `UPDATE voices SET status = 'failed', updated_at = ? WHERE id = ?`, now, j.VoiceID)
		return err
	}, &jerr)
}

// finishJob moves a job owned by owner to the terminal status, runs voice to
// update its voice, and deletes the clip. Finishing again with the same
// status is a no-op.
func (db *DB) finishJob(ctx context.Context, jobID, owner, status string,
	voice func(*sql.Tx, *control.Job, int64) error, jerr *control.JobError) error {
	return db.update(ctx, func(tx *sql.Tx) error {
		j, err := scanJob(tx.QueryRowContext(ctx, `SELECT `+jobCols+` FROM jobs WHERE id = ?`, jobID))
		if err != nil {
			return notFound(err, "job not found")
		}
		now := db.nowMS()
		if changed, err := j.Finish(owner, status, jerr, now); !changed {
			return err
		}
		errJSON, err := jobErrorJSON(j.Error)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = ?, progress = ?, error = ?, updated_at = ? WHERE id = ?`,
			j.Status, j.Progress, errJSON, now, jobID); err != nil {
			return fmt.Errorf("sqlite: finish job: %w", err)
		}
		if err := voice(tx, j, now); err != nil {
			return fmt.Errorf("sqlite: finish job voice: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM clips WHERE job_id = ?`, jobID); err != nil {
			return fmt.Errorf("sqlite: delete clip: %w", err)
		}
		return recordChange(ctx, tx, "voice", j.VoiceID, now)
	})
}

// ExpireJobs ends jobs pending since before cutoff as expired, fails their
// voices and drops their clips.
func (db *DB) ExpireJobs(ctx context.Context, cutoff int64) (_ int, err error) {
	ctx, end := db.call(ctx)
	defer end(&err)
	var n int
	err = db.update(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, voice_id FROM jobs WHERE status = 'pending' AND created_at < ?`, cutoff)
		if err != nil {
			return err
		}
		type pair struct{ job, voice string }
		var expired []pair
		for rows.Next() {
			var p pair
			if err := rows.Scan(&p.job, &p.voice); err != nil {
				rows.Close()
				return err
			}
			expired = append(expired, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		jerr, _ := jobErrorJSON(&control.JobExpiredError)
		now := db.nowMS()
		for _, p := range expired {
			if _, err := tx.ExecContext(ctx, `UPDATE jobs SET status = 'expired', error = ?, updated_at = ? WHERE id = ?`,
				jerr, now, p.job); err != nil {
				return fmt.Errorf("sqlite: expire job: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE voices SET status = 'failed', updated_at = ?
				WHERE id = ? AND status = 'processing'`, now, p.voice); err != nil {
				return fmt.Errorf("sqlite: expire voice: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM clips WHERE job_id = ?`, p.job); err != nil {
				return fmt.Errorf("sqlite: delete clip: %w", err)
			}
			if err := recordChange(ctx, tx, "voice", p.voice, now); err != nil {
				return err
			}
		}
		n = len(expired)
		return nil
	})
	return n, err
}

// jobErrorJSON encodes the error column of a job: nil (NULL) for none.
func jobErrorJSON(jerr *control.JobError) (any, error) {
	if jerr == nil {
		return nil, nil
	}
	b, err := json.Marshal(jerr)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}
