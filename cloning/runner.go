// Package cloning runs clone jobs: workers claim pending jobs from the store
// (a lease renewed while they work, so a job whose server died is taken up
// again once its lease lapses), decode the clip, let the engine enroll it,
// render a short preview, and finish the job. Execution is at-least-once:
// every step is repeatable and SucceedJob is idempotent, so a job that runs
// twice leaves one result.
package cloning

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
)

// Options configure a Runner. Zero fields take the defaults noted.
type Options struct {
	Workers     int           // concurrent jobs on this server (default 1)
	Lease       time.Duration // how long a claim holds without renewal (default 30 s)
	Poll        time.Duration // idle wait between claims (default 200 ms)
	MaxAttempts int           // claims of one job before it fails (default 3)
	ExpireAfter time.Duration // pending longer than this is expired (default 1 h)
	SweepEvery  time.Duration // how often expiry runs (default 1 min)

	// MediaDir receives preview WAVs; empty: no preview file and no
	// sample_audio_url. BaseURL prefixes the URL: BaseURL + "/media/<file>".
	MediaDir string
	BaseURL  string
	// PreviewText is spoken for every preview; default: a sentence in the
	// clip's language (previewTexts).
	PreviewText string

	// TestDelay sleeps inside every job after decoding, renewing the
	// lease, so that tests can kill a server mid-job. Test only: set from
	// VOICESVC_CLONE_TEST_DELAY by FromEnv.
	TestDelay time.Duration
	Logger    *slog.Logger
}

// FromEnv applies the test-only environment overrides to o:
// VOICESVC_CLONE_TEST_DELAY (a duration each job waits mid-way) and
// VOICESVC_CLONE_LEASE (the lease, so restart tests need not wait 30 s).
// Production deployments leave both unset.
func FromEnv(o Options) Options {
	if d, err := time.ParseDuration(os.Getenv("VOICESVC_CLONE_TEST_DELAY")); err == nil && d > 0 {
		o.TestDelay = d
	}
	if d, err := time.ParseDuration(os.Getenv("VOICESVC_CLONE_LEASE")); err == nil && d > 0 {
		o.Lease = d
	}
	if n, err := strconv.Atoi(os.Getenv("VOICESVC_CLONE_WORKERS")); err == nil && n > 0 {
		o.Workers = n
	}
	return o
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 1
	}
	if o.Lease <= 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.ExpireAfter <= 0 {
		o.ExpireAfter = time.Hour
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Runner owns the worker and sweeper goroutines of one server.
type Runner struct {
	store control.JobService
	eng   engine.Engine
	opts  Options
	owner string // lease owner: unique per process start
	log   *slog.Logger

	wake   chan struct{}
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New makes a Runner; nothing runs until Start.
func New(store control.JobService, eng engine.Engine, opts Options) *Runner {
	opts = opts.withDefaults()
	var b [6]byte
	crand.Read(b[:])
	host, _ := os.Hostname()
	return &Runner{
		store: store, eng: eng, opts: opts, log: opts.Logger,
		owner: fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:])),
		wake:  make(chan struct{}, 1),
	}
}

// Start launches the workers and the expiry sweeper; they run until Stop
// or until ctx ends.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	for i := 0; i < r.opts.Workers; i++ {
		r.wg.Add(1)
		go r.work(ctx)
	}
	r.wg.Add(1)
	go r.sweep(ctx)
}

// Stop ends the goroutines and waits for them. A job cut short stays
// running under its lease and is taken up again after it lapses.
func (r *Runner) Stop() {
	r.mu.Lock()
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	r.wg.Wait()
}

// Wake makes an idle worker look for a job now (the enroll handler calls
// it after storing one, so 202 -> running does not wait for a poll).
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Runner) work(ctx context.Context) {
	defer r.wg.Done()
	for ctx.Err() == nil {
		if r.claimOne(ctx) {
			continue // maybe more are queued
		}
		// Jitter keeps servers sharing a store from polling in step.
		wait := r.opts.Poll + time.Duration(rand.Int64N(int64(r.opts.Poll/4)+1))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// claimOne claims and runs one job; false when there was none (or the
// store failed, which is logged and retried after the poll interval).
func (r *Runner) claimOne(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	job, clip, err := r.store.ClaimJob(cctx, r.owner, r.opts.Lease)
	cancel()
	if control.IsCode(err, control.ENotFound) || ctx.Err() != nil {
		return false
	}
	if err != nil {
		r.log.Warn("clone job claim failed", "err", err)
		return false
	}
	r.run(ctx, job, clip)
	return true
}

func (r *Runner) sweep(ctx context.Context) {
	defer r.wg.Done()
	t := time.NewTicker(r.opts.SweepEvery)
	defer t.Stop()
	for {
		cutoff := time.Now().Add(-r.opts.ExpireAfter).UnixMilli()
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		n, err := r.store.ExpireJobs(sctx, cutoff)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			r.log.Warn("clone job expiry failed", "err", err)
		case n > 0:
			r.log.Info("clone jobs expired", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errLeaseLost: the store no longer lets this worker report on the job
// (the voice was deleted, or the lease lapsed and another worker took it).
var errLeaseLost = errors.New("cloning: lease lost")
