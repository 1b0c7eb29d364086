package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"voicesvc/control"
)

const lease = time.Minute

// enroll creates a draft voice of ws (via StartEnrollment with create) and
// returns it with its pending job.
func enroll(t *testing.T, s control.Store, ws string) (*control.Voice, *control.Job) {
	t.Helper()
	v := newVoice(ws, "cloned")
	v.ConsentAt, v.ConsentKeyID = 42, "key1"
	job := &control.Job{}
	clip := &control.Clip{Data: []byte("RIFF"), Filename: "a.wav", Language: "en", RefText: "hello"}
	if err := s.StartEnrollment(t.Context(), v, true, job, clip); err != nil {
		t.Fatal(err)
	}
	return v, job
}

func testEnrollment(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	v, job := enroll(t, s, ws.ID)
	if v.Status != control.VoiceProcessing || v.ConsentAt != 42 || v.ConsentKeyID != "key1" {
		t.Fatalf("voice after enrollment %+v", v)
	}
	got, err := s.GetJob(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != control.JobPending || got.VoiceID != v.ID || got.OrgID != ws.ID || got.JobType == "" || got.Error != nil {
		t.Fatalf("job %+v", got)
	}
	_, err = s.GetJob(ctx, control.NewID())
	wantCode(t, err, control.ENotFound)

	draft := mustVoice(t, s, newVoice(ws.ID, "draft"))
	failed := newVoice(ws.ID, "failed")
	failed.Status = control.VoiceFailed
	mustVoice(t, s, failed)
	ready := newVoice(ws.ID, "ready")
	ready.Status = control.VoiceReady
	mustVoice(t, s, ready)
	other := mustWorkspace(t, s, "free")
	foreign := mustVoice(t, s, newVoice(other.ID, "foreign"))
	tests := []struct {
		name string
		v    *control.Voice
		code string
	}{
		{"draft", draft, ""},
		{"failed", failed, ""},
		{"processing", v, control.EVoiceBusy},
		{"ready", ready, control.EVoiceBusy},
		{"unknown", newVoice(ws.ID, "x"), control.ENotFound},
		{"another workspace's", &control.Voice{ID: foreign.ID, OrgID: ws.ID}, control.ENotFound},
	}
	for _, tt := range tests {
		if tt.v.ID == "" {
			tt.v.ID = control.NewID()
		}
		err := s.StartEnrollment(ctx, tt.v, false, &control.Job{}, &control.Clip{Data: []byte{1}})
		if tt.code == "" && err != nil || tt.code != "" && !control.IsCode(err, tt.code) {
			t.Errorf("%s: got %v, want %q", tt.name, err, tt.code)
		}
	}
	if got, _ := s.GetVoice(ctx, failed.ID); got == nil || got.Status != control.VoiceProcessing {
		t.Fatalf("failed voice not re-enrolled: %+v", got)
	}
}

func testJobLifecycle(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	_, _, err := s.ClaimJob(ctx, "w1", lease)
	wantCode(t, err, control.ENotFound)

	v, job := enroll(t, s, ws.ID)
	j, clip, err := s.ClaimJob(ctx, "w1", lease)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != job.ID || j.Status != control.JobRunning || j.LeaseOwner != "w1" || j.Attempts != 1 ||
		clip == nil || !bytes.Equal(clip.Data, []byte("RIFF")) || clip.RefText != "hello" || clip.Filename != "a.wav" {
		t.Fatalf("claimed %+v %+v", j, clip)
	}
	if _, _, err := s.ClaimJob(ctx, "w2", lease); !control.IsCode(err, control.ENotFound) {
		t.Fatalf("a leased job was claimed again: %v", err)
	}
	if err := s.ReportProgress(ctx, job.ID, "w1", 50, lease); err != nil {
		t.Fatal(err)
	}
	wantCode(t, s.ReportProgress(ctx, job.ID, "w2", 60, lease), control.ENotFound)
	if got, _ := s.GetJob(ctx, job.ID); got.Progress != 50 {
		t.Fatalf("progress %d", got.Progress)
	}
	wantCode(t, s.SucceedJob(ctx, job.ID, "w2", []byte("p"), ""), control.ENotFound)
	if err := s.SucceedJob(ctx, job.ID, "w1", []byte("profile"), "/media/x.wav"); err != nil {
		t.Fatal(err)
	}
	// At-least-once: finishing again, from any worker, changes nothing.
	if err := s.SucceedJob(ctx, job.ID, "w1", []byte("other"), ""); err != nil {
		t.Fatalf("second SucceedJob: %v", err)
	}
	got, _ := s.GetJob(ctx, job.ID)
	gv, _ := s.GetVoice(ctx, v.ID)
	if got.Status != control.JobSucceeded || got.Progress != 100 || gv.Status != control.VoiceReady ||
		string(gv.Profile) != "profile" || gv.SampleAudioURL != "/media/x.wav" {
		t.Fatalf("after success job %+v voice %+v", got, gv)
	}
	wantCode(t, s.ReportProgress(ctx, job.ID, "w1", 1, lease), control.ENotFound)
	wantCode(t, s.FailJob(ctx, job.ID, "w1", control.JobError{Code: "x"}), control.ENotFound)

	// A failing job fails its voice and keeps the error.
	v2, job2 := enroll(t, s, ws.ID)
	if _, _, err := s.ClaimJob(ctx, "w1", lease); err != nil {
		t.Fatal(err)
	}
	jerr := control.JobError{Code: "clip_unusable", Message: "2.1 s of speech"}
	if err := s.FailJob(ctx, job2.ID, "w1", jerr); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetJob(ctx, job2.ID)
	gv, _ = s.GetVoice(ctx, v2.ID)
	if got.Status != control.JobFailed || got.Error == nil || *got.Error != jerr || gv.Status != control.VoiceFailed {
		t.Fatalf("after failure job %+v voice %+v", got, gv)
	}
	// Terminal jobs and their clips are never claimed again.
	_, _, err = s.ClaimJob(ctx, "w1", lease)
	wantCode(t, err, control.ENotFound)
}

func testJobLeaseExpiry(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	v, job := enroll(t, s, ws.ID)
	// A negative lease is already lapsed: the worker "died" at once.
	if _, _, err := s.ClaimJob(ctx, "dead", -time.Second); err != nil {
		t.Fatal(err)
	}
	j, clip, err := s.ClaimJob(ctx, "alive", lease)
	if err != nil {
		t.Fatal(err)
	}
	if j.ID != job.ID || j.Attempts != 2 || j.LeaseOwner != "alive" || clip == nil {
		t.Fatalf("re-claimed %+v %+v", j, clip)
	}
	wantCode(t, s.ReportProgress(ctx, job.ID, "dead", 10, lease), control.ENotFound)
	wantCode(t, s.SucceedJob(ctx, job.ID, "dead", []byte("p"), ""), control.ENotFound)
	if err := s.SucceedJob(ctx, job.ID, "alive", []byte("p"), ""); err != nil {
		t.Fatal(err)
	}
	// The late worker finishing the same job afterwards is harmless.
	if err := s.SucceedJob(ctx, job.ID, "dead", []byte("p"), ""); err != nil {
		t.Fatalf("late SucceedJob: %v", err)
	}
	if gv, _ := s.GetVoice(ctx, v.ID); gv.Status != control.VoiceReady {
		t.Fatalf("voice %+v", gv)
	}
}

func testDeleteVoiceCancels(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	v1, pending := enroll(t, s, ws.ID)
	if err := s.DeleteVoice(ctx, ws.ID, v1.ID); err != nil {
		t.Fatal(err)
	}
	v2, running := enroll(t, s, ws.ID)
	if _, _, err := s.ClaimJob(ctx, "w1", lease); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteVoice(ctx, ws.ID, v2.ID); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{pending.ID, running.ID} {
		if j, err := s.GetJob(ctx, id); err != nil || j.Status != control.JobCancelled {
			t.Fatalf("job %s after delete: %+v %v", id, j, err)
		}
	}
	wantCode(t, s.SucceedJob(ctx, running.ID, "w1", []byte("p"), ""), control.ENotFound)
	_, _, err := s.ClaimJob(ctx, "w1", lease)
	wantCode(t, err, control.ENotFound)
}

func testExpireJobs(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	v1, job1 := enroll(t, s, ws.ID)
	if n, err := s.ExpireJobs(ctx, job1.CreatedAt); err != nil || n != 0 {
		t.Fatalf("nothing is older than its own creation: %d %v", n, err)
	}
	if _, _, err := s.ClaimJob(ctx, "w1", lease); err != nil { // job1 runs
		t.Fatal(err)
	}
	v2, job2 := enroll(t, s, ws.ID)
	n, err := s.ExpireJobs(ctx, control.NowMS()+1)
	if err != nil || n != 1 {
		t.Fatalf("expired %d, %v; want 1 (the pending one)", n, err)
	}
	got, _ := s.GetJob(ctx, job2.ID)
	gv2, _ := s.GetVoice(ctx, v2.ID)
	gv1, _ := s.GetVoice(ctx, v1.ID)
	if got.Status != control.JobExpired || got.Error == nil || gv2.Status != control.VoiceFailed ||
		gv1.Status != control.VoiceProcessing {
		t.Fatalf("expired job %+v, its voice %+v, running job's voice %+v", got, gv2, gv1)
	}
	_, _, err = s.ClaimJob(ctx, "w2", lease)
	wantCode(t, err, control.ENotFound)
}

func testClaimConcurrent(t *testing.T, s control.Store) {
	ctx := t.Context()
	ws := mustWorkspace(t, s, "free")
	want := map[string]bool{}
	for range 20 {
		_, j := enroll(t, s, ws.ID)
		want[j.ID] = true
	}
	var mu sync.Mutex
	claims := map[string]int{}
	parallel(2, func(i int) {
		owner := fmt.Sprint("worker", i)
		for {
			j, _, err := s.ClaimJob(ctx, owner, lease)
			if control.IsCode(err, control.ENotFound) {
				return
			}
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			mu.Lock()
			claims[j.ID]++
			mu.Unlock()
			if err := s.SucceedJob(ctx, j.ID, owner, []byte("p"), ""); err != nil {
				t.Errorf("succeed: %v", err)
			}
		}
	})
	if len(claims) != 20 {
		t.Fatalf("%d jobs claimed, want 20", len(claims))
	}
	for id, n := range claims {
		if n != 1 || !want[id] {
			t.Errorf("job %s claimed %d times", id, n)
		}
	}
}
