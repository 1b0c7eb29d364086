package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"voicesvc/control"
)

// TestClaimJobWithoutClip: a job whose clip is gone is still claimed, with
// no clip, so that the worker fails it rather than leaving it pending.
func TestClaimJobWithoutClip(t *testing.T) {
	dsn := MustSchemaDSN(t)
	db := MustOpenDB(t, dsn)
	ctx := context.Background()
	ws := &control.Workspace{Name: "w"}
	if err := db.CreateWorkspace(ctx, ws); err != nil {
		t.Fatal(err)
	}
	v := &control.Voice{OrgID: ws.ID, Name: "v", Visibility: "private"}
	job := &control.Job{}
	clip := &control.Clip{Data: []byte("RIFF"), Filename: "a.wav"}
	if err := db.StartEnrollment(ctx, v, true, job, clip); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM clips`); err != nil {
		t.Fatal(err)
	}
	j, c, err := db.ClaimJob(ctx, "w1", time.Minute)
	if err != nil || j == nil || j.ID != job.ID || j.Status != control.JobRunning || c != nil {
		t.Fatalf("ClaimJob = %+v, %+v, %v", j, c, err)
	}
}
