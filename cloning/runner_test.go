package cloning

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/control/sqlite"
	"voicesvc/engine"
)

// fakeEngine enrolls deterministically (the profile is a hash of the
// samples) and can fail its first calls.
type fakeEngine struct {
	failFirst int32 // Enroll calls that fail with a transient error
	unusable  bool
	calls     atomic.Int32
}

func (*fakeEngine) Name() string                   { return "fake" }
func (*fakeEngine) NativeRate() int                { return 16000 }
func (*fakeEngine) Languages() []string            { return []string{"en"} }
func (*fakeEngine) Catalog() []engine.CatalogVoice { return nil }

func (f *fakeEngine) Enroll(ctx context.Context, clip engine.Clip) ([]byte, error) {
	n := f.calls.Add(1)
	if f.unusable {
		return nil, fmt.Errorf("%w: found 2.5 s of continuous speech", engine.ErrClipUnusable)
	}
	if n <= f.failFirst {
		return nil, errors.New("engine hiccup")
	}
	var buf bytes.Buffer
	fmt.Fprint(&buf, clip.Samples, clip.Rate, clip.Language)
	h := sha256.Sum256(buf.Bytes())
	return []byte(fmt.Sprintf(`{"fake":"%x"}`, h[:8])), nil
}

func (*fakeEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	return emit(engine.Chunk{Samples: make([]float32, 1600), Last: true})
}

func testStore(t *testing.T) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "t.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// queue stores a clone job with a small WAV clip (or data when given).
func queue(t *testing.T, s control.Store, data []byte) (*control.Voice, *control.Job) {
	t.Helper()
	ws := &control.Workspace{Name: "ws", Plan: "pro"}
	if err := s.CreateWorkspace(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	if data == nil {
		pcm := make([]float32, 8000)
		for i := range pcm {
			pcm[i] = float32(i%50) / 100
		}
		data = codec.AppendPCM(codec.AppendWAVHeader(nil, 16000, 16, false, 2*len(pcm)), codec.S16LE, pcm)
	}
	v := &control.Voice{OrgID: ws.ID, Name: "v", CloneMethod: "instant", Visibility: "private", PrimaryLanguage: "en",
		ConsentAt: 1, ConsentKeyID: "k"}
	job := &control.Job{}
	if err := s.StartEnrollment(t.Context(), v, true, job, &control.Clip{Data: data, Language: "en"}); err != nil {
		t.Fatal(err)
	}
	return v, job
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func waitJob(t *testing.T, s control.Store, id string) *control.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := s.GetJob(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if control.JobTerminal(j.Status) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job still %s", j.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func start(t *testing.T, s control.Store, e engine.Engine, o Options) *Runner {
	o.Logger = quiet()
	if o.Poll == 0 {
		o.Poll = 20 * time.Millisecond
	}
	r := New(s, e, o)
	r.Start(context.Background())
	t.Cleanup(r.Stop)
	return r
}

func TestRunnerSucceeds(t *testing.T) {
	s := testStore(t)
	media := t.TempDir()
	v, job := queue(t, s, nil)
	start(t, s, &fakeEngine{}, Options{MediaDir: media, BaseURL: "http://h/"})
	j := waitJob(t, s, job.ID)
	if j.Status != control.JobSucceeded || j.Progress != 100 {
		t.Fatalf("job %+v", j)
	}
	got, _ := s.GetVoice(t.Context(), v.ID)
	name := strings.TrimPrefix(got.SampleAudioURL, "http://h/media/")
	if got.Status != control.VoiceReady || len(got.Profile) == 0 || !strings.HasPrefix(name, v.ID+"-") {
		t.Fatalf("voice %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(media, name)); err != nil || string(b[:4]) != "RIFF" {
		t.Fatalf("preview: %v", err)
	}
}

// At-least-once: a worker whose lease lapsed (it stalled) while another
// finished the job cannot change the result when it resumes.
func TestRunnerJobRunTwice(t *testing.T) {
	s := testStore(t)
	media := t.TempDir()
	v, job := queue(t, s, nil)
	a := New(s, &fakeEngine{}, Options{MediaDir: media, Lease: 30 * time.Millisecond, Logger: quiet()})
	b := New(s, &fakeEngine{}, Options{MediaDir: media, Logger: quiet()})
	ja, ca, err := s.ClaimJob(t.Context(), a.owner, a.opts.Lease)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // a stalls; its lease lapses
	jb, cb, err := s.ClaimJob(t.Context(), b.owner, time.Minute)
	if err != nil || jb.ID != job.ID || jb.Attempts != 2 {
		t.Fatalf("second claim: %+v %v", jb, err)
	}
	b.run(t.Context(), jb, cb)
	first, _ := s.GetVoice(t.Context(), v.ID)
	a.run(t.Context(), ja, ca) // a resumes: its reports are refused
	after, _ := s.GetVoice(t.Context(), v.ID)
	j, _ := s.GetJob(t.Context(), job.ID)
	if j.Status != control.JobSucceeded || after.Status != control.VoiceReady ||
		!bytes.Equal(first.Profile, after.Profile) || first.SampleAudioURL != after.SampleAudioURL {
		t.Fatalf("job %+v voice before %+v after %+v", j, first, after)
	}
	if files, _ := os.ReadDir(media); len(files) != 1 {
		t.Fatalf("media: %d files", len(files))
	}
	// Finishing again is a no-op too.
	if err := s.SucceedJob(t.Context(), job.ID, b.owner, first.Profile, first.SampleAudioURL); err != nil {
		t.Fatal(err)
	}
}

func TestRunnerTransientRetries(t *testing.T) {
	s := testStore(t)
	_, job := queue(t, s, nil)
	e := &fakeEngine{failFirst: 1}
	start(t, s, e, Options{Lease: 100 * time.Millisecond})
	if j := waitJob(t, s, job.ID); j.Status != control.JobSucceeded || j.Attempts != 2 {
		t.Fatalf("job %+v", j)
	}

	s2 := testStore(t)
	_, job2 := queue(t, s2, nil)
	start(t, s2, &fakeEngine{failFirst: 100}, Options{Lease: 100 * time.Millisecond, MaxAttempts: 2})
	j := waitJob(t, s2, job2.ID)
	if j.Status != control.JobFailed || j.Error == nil || j.Error.Code != CodeCloneFailed || j.Attempts != 2 {
		t.Fatalf("job %+v %+v", j, j.Error)
	}
}

func TestRunnerFailures(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		eng  *fakeEngine
		code string
	}{
		{"unusable", nil, &fakeEngine{unusable: true}, CodeClipUnusable},
		{"unknown", []byte("\x00\x01\x02\x03 binary"), &fakeEngine{}, CodeUnsupportedAudio},
		{"corrupt", []byte("RIFF\x10\x00\x00\x00WAVEfmt "), &fakeEngine{}, CodeCorruptAudio},
	}
	for _, c := range cases {
		s := testStore(t)
		v, job := queue(t, s, c.data)
		start(t, s, c.eng, Options{})
		j := waitJob(t, s, job.ID)
		got, _ := s.GetVoice(t.Context(), v.ID)
		if j.Status != control.JobFailed || j.Error == nil || j.Error.Code != c.code || got.Status != control.VoiceFailed {
			t.Errorf("%s: job %+v error %+v voice %s", c.name, j, j.Error, got.Status)
		}
		if j.Attempts != 1 {
			t.Errorf("%s: a final failure ran %d times", c.name, j.Attempts)
		}
	}
}

// Deleting the voice cancels the job; the worker notices and lets go.
func TestRunnerVoiceDeleted(t *testing.T) {
	s := testStore(t)
	v, job := queue(t, s, nil)
	start(t, s, &fakeEngine{}, Options{TestDelay: 300 * time.Millisecond})
	for {
		j, _ := s.GetJob(t.Context(), job.ID)
		if j.Progress >= progressDecoded {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.DeleteVoice(t.Context(), v.OrgID, v.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if j, _ := s.GetJob(t.Context(), job.ID); j.Status != control.JobCancelled {
		t.Fatalf("job %+v", j)
	}
}

// previewGate is a fakeEngine whose preview synthesis waits for release.
type previewGate struct {
	fakeEngine
	entered, release chan struct{}
}

func (g *previewGate) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	close(g.entered)
	<-g.release
	return g.fakeEngine.Synthesize(ctx, req, emit)
}

// A voice deleted while its clone job renders the preview: the preview the
// job writes after the delete does not stay in the media directory.
func TestRunnerPreviewAfterDelete(t *testing.T) {
	s := testStore(t)
	media := t.TempDir()
	v, _ := queue(t, s, nil)
	g := &previewGate{entered: make(chan struct{}), release: make(chan struct{})}
	r := New(s, g, Options{MediaDir: media, BaseURL: "http://h", Logger: quiet()})
	job, clip, err := s.ClaimJob(t.Context(), r.owner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); r.run(t.Context(), job, clip) }()
	<-g.entered
	if err := s.DeleteVoice(t.Context(), v.OrgID, v.ID); err != nil {
		t.Fatal(err)
	}
	close(g.release)
	<-done
	if files, _ := filepath.Glob(filepath.Join(media, v.ID+"-*")); len(files) > 0 {
		t.Fatalf("the deleted voice's preview is still there: %v", files)
	}
}
