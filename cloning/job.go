package cloning

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
)

// Progress milestones reported to the job (docs/api.md#job-object: 0-100).
const (
	progressDecoded  = 20
	progressAnalysed = 60
	progressPreview  = 90
)

// Job error codes (the job's error.code; docs/api.md#jobs).
const (
	CodeClipUnusable     = "clip_unusable"     // not enough continuous speech
	CodeUnsupportedAudio = "unsupported_audio" // not WAV, MP3, FLAC or Ogg Opus
	CodeCorruptAudio     = "corrupt_audio"     // the container is broken
	CodeInvalidInput     = "invalid_input"     // e.g. a language the engine lacks
	CodeCloneFailed      = "clone_failed"      // internal failure, retries used up
)

// jobFailure is an outcome that ends the job as failed at once: running it
// again would give the same answer.
type jobFailure struct{ control.JobError }

func (f *jobFailure) Error() string { return f.Code + ": " + f.Message }

func fail(code, format string, args ...any) error {
	return &jobFailure{control.JobError{Code: code, Message: fmt.Sprintf(format, args...)}}
}

// run executes one claimed job to its end, or leaves it to lease expiry
// when a transient error hits before its last attempt.
func (r *Runner) run(ctx context.Context, job *control.Job, clip *control.Clip) {
	log := r.log.With("job", job.ID, "voice", job.VoiceID, "attempt", job.Attempts)
	log.Info("clone job started")
	start := time.Now()
	jctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	hb := r.startHeartbeat(jctx, cancel, job.ID)
	defer hb.stop()

	var err error
	var profile []byte
	var sample, previewFile string
	succeeded := false
	defer func() {
		// A preview is public only as its job's result: a job that did not
		// succeed with it (its voice deleted while the preview was written,
		// a lost lease, a failure after it) takes it back.
		if previewFile != "" && !succeeded {
			if err := removePreview(previewFile); err != nil {
				log.Warn("clone preview left behind", "file", previewFile, "err", err)
			}
		}
	}()
	switch {
	case clip == nil:
		err = fail(CodeCloneFailed, "the reference clip of this job is missing")
	case job.Attempts > r.opts.MaxAttempts:
		err = fail(CodeCloneFailed, "cloning did not finish after %d attempts", r.opts.MaxAttempts)
	default:
		profile, sample, previewFile, err = r.execute(jctx, job, clip, hb.set)
	}
	var jf *jobFailure
	switch {
	case err == nil:
		err = r.finish(job.ID, func(c context.Context) error {
			return r.store.SucceedJob(c, job.ID, r.owner, profile, sample)
		})
		if err == nil {
			succeeded = true
			log.Info("clone job succeeded", "seconds", time.Since(start).Seconds(), "sample", sample)
			return
		}
	case errors.As(err, &jf):
		if ferr := r.finish(job.ID, func(c context.Context) error {
			return r.store.FailJob(c, job.ID, r.owner, jf.JobError)
		}); ferr != nil {
			err = ferr
			break
		}
		log.Info("clone job failed", "code", jf.Code, "message", jf.Message)
		return
	}
	if lost := context.Cause(jctx); errors.Is(lost, errLeaseLost) || control.IsCode(err, control.ENotFound) {
		log.Info("clone job abandoned: no longer ours (deleted, or taken over)", "err", err)
		return
	}
	if ctx.Err() != nil {
		log.Info("clone job interrupted by shutdown; its lease will lapse and it runs again")
		return
	}
	if job.Attempts >= r.opts.MaxAttempts {
		r.finish(job.ID, func(c context.Context) error {
			return r.store.FailJob(c, job.ID, r.owner, control.JobError{Code: CodeCloneFailed,
				Message: fmt.Sprintf("cloning failed after %d attempts: %v", job.Attempts, err)})
		})
		log.Error("clone job failed for good", "err", err)
		return
	}
	// Transient: stop renewing; the lease lapses and a worker (maybe on
	// another server) claims the job again.
	log.Warn("clone job attempt failed; will retry after the lease lapses", "err", err)
}

// finish runs a terminal store call with its own deadline: it must land
// even while the server shuts down.
func (r *Runner) finish(jobID string, f func(context.Context) error) error {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return f(c)
}

// execute decodes, enrolls and renders the preview. Errors are *jobFailure
// when final, anything else is transient. previewFile is the file written
// for sample, returned with an error too, so that the caller can remove it.
func (r *Runner) execute(ctx context.Context, job *control.Job, clip *control.Clip,
	progress func(int) error) (profile []byte, sample, previewFile string, err error) {
	samples, rate, err := codec.DecodeClip(clip.Data)
	switch {
	case errors.Is(err, codec.ErrUnknownFormat):
		return nil, "", "", fail(CodeUnsupportedAudio, "the clip is not audio we can read: upload WAV, MP3, FLAC or Ogg Opus")
	case errors.Is(err, codec.ErrTooLong):
		return nil, "", "", fail(CodeClipUnusable, "the clip is longer than %d minutes", codec.MaxClipSamples/48000/60)
	case err != nil:
		return nil, "", "", fail(CodeCorruptAudio, "the clip could not be decoded: %v", err)
	case len(samples) == 0:
		return nil, "", "", fail(CodeClipUnusable, "the clip contains no audio")
	}
	if err := progress(progressDecoded); err != nil {
		return nil, "", "", err
	}
	if d := r.opts.TestDelay; d > 0 {
		select {
		case <-ctx.Done():
			return nil, "", "", context.Cause(ctx)
		case <-time.After(d):
		}
	}
	profile, err = r.eng.Enroll(ctx, engine.Clip{Samples: samples, Rate: rate, Language: clip.Language, RefText: clip.RefText})
	switch {
	case errors.Is(err, engine.ErrClipUnusable):
		return nil, "", "", fail(CodeClipUnusable, "%s", strings.TrimPrefix(err.Error(), "espeak: "))
	case errors.Is(err, engine.ErrInvalidInput):
		return nil, "", "", fail(CodeInvalidInput, "%v", err)
	case err != nil:
		return nil, "", "", err
	}
	if err := progress(progressAnalysed); err != nil {
		return nil, "", "", err
	}
	sample, previewFile = r.preview(ctx, job, clip.Language, profile)
	if err := ctx.Err(); err != nil {
		// Cut short (shutdown, lost lease): do not succeed without the
		// preview a full run would have made.
		return nil, "", previewFile, context.Cause(ctx)
	}
	if err := progress(progressPreview); err != nil {
		return nil, "", previewFile, err
	}
	return profile, sample, previewFile, nil
}

// preview renders the preview and returns its public URL and its file, or
// "" without a media directory. A failed preview does not fail the clone:
// the voice is usable without one.
func (r *Runner) preview(ctx context.Context, job *control.Job, clipLanguage string, profile []byte) (url, file string) {
	if r.opts.MediaDir == "" {
		return "", ""
	}
	text, lang := r.previewText(clipLanguage)
	var pcm []float32
	err := r.eng.Synthesize(ctx, engine.Request{Text: text, Language: lang, Profile: profile},
		func(c engine.Chunk) error { pcm = append(pcm, c.Samples...); return nil })
	if err == nil {
		// Named by voice and run: two runs of one job (a lease that lapsed
		// under a stalled worker) each write, and take back, their own
		// file, so a run that loses never removes the winner's preview.
		name := job.VoiceID + "-" + control.NewID() + ".wav"
		file = filepath.Join(r.opts.MediaDir, name)
		if err = writeWAV(file, pcm, r.eng.NativeRate()); err == nil {
			return strings.TrimRight(r.opts.BaseURL, "/") + "/media/" + name, file
		}
	}
	r.log.Warn("clone preview failed; the voice gets no sample", "job", job.ID, "err", err)
	return "", ""
}

// heartbeat renews the job's lease every third of it with the latest
// progress, and cancels the job when the store says it is no longer ours.
type heartbeat struct {
	r      *Runner
	ctx    context.Context
	cancel context.CancelCauseFunc
	jobID  string
	mu     sync.Mutex
	pct    int
	done   chan struct{}
	wg     sync.WaitGroup
}

func (r *Runner) startHeartbeat(ctx context.Context, cancel context.CancelCauseFunc, jobID string) *heartbeat {
	h := &heartbeat{r: r, ctx: ctx, cancel: cancel, jobID: jobID, done: make(chan struct{})}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(r.opts.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				h.mu.Lock()
				p := h.pct
				h.mu.Unlock()
				h.report(p)
			}
		}
	}()
	return h
}

// set records progress and reports it at once.
func (h *heartbeat) set(p int) error {
	h.mu.Lock()
	h.pct = p
	h.mu.Unlock()
	return h.report(p)
}

func (h *heartbeat) report(p int) error {
	c, cancel := context.WithTimeout(h.ctx, 10*time.Second)
	defer cancel()
	err := h.r.store.ReportProgress(c, h.jobID, h.r.owner, p, h.r.opts.Lease)
	if control.IsCode(err, control.ENotFound) {
		h.cancel(errLeaseLost)
		return errLeaseLost
	}
	if err != nil && h.ctx.Err() == nil {
		// A store hiccup: the lease has slack (we renew at a third), so
		// carry on; a lost lease shows up on the next report.
		h.r.log.Warn("clone job progress report failed", slog.String("job", h.jobID), slog.Any("err", err))
	}
	return nil
}

func (h *heartbeat) stop() {
	close(h.done)
	h.wg.Wait()
}

// previewTexts greet in the clip's language where we have a sentence;
// other languages get the English one, spoken with English rules (the
// request language then wins over the profile's, keeping the voice).
var previewTexts = map[string]string{
	"en": "Hello! This is a preview of my new voice, made from the clip you uploaded.",
	"de": "Hallo! Das ist eine Hörprobe meiner neuen Stimme, gemacht aus deiner Aufnahme.",
	"fr": "Bonjour ! Voici un aperçu de ma nouvelle voix, créée à partir de votre enregistrement.",
	"es": "¡Hola! Esta es una muestra de mi nueva voz, creada a partir de tu grabación.",
	"it": "Ciao! Questa è un'anteprima della mia nuova voce, creata dalla tua registrazione.",
	"pt": "Olá! Esta é uma amostra da minha nova voz, feita a partir da sua gravação.",
	"hi": "नमस्ते! यह मेरी नई आवाज़ का नमूना है, जो आपकी रिकॉर्डिंग से बनी है।",
}

// previewText picks the preview sentence and its language for a clip
// language; Options.PreviewText, when set, is used for every language.
func (r *Runner) previewText(lang string) (string, string) {
	if r.opts.PreviewText != "" {
		return r.opts.PreviewText, ""
	}
	primary, _, _ := strings.Cut(strings.ToLower(lang), "-")
	if t, ok := previewTexts[primary]; ok {
		return t, ""
	}
	return previewTexts["en"], "en"
}
