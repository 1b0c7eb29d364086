package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/espeak"
	"voicesvc/engine/reference"
	"voicesvc/engine/upstream"
	"voicesvc/engine/worker"
)

// newEngine builds the engine the server synthesizes with, and what stops it.
//
// espeak-ng keeps global state and renders one sentence at a time per
// process, so parallelism comes from worker subprocesses (`voicesvc
// engine-worker`) behind the pool; with --engine-workers 0 one in-process
// worker serves. The reference engine costs nothing and is safe for
// concurrent use: it runs without the pool, so its pacing never holds a
// worker and what is measured is the gateway alone; engine.Metered gives it
// the voicesvc_engine_* series the pool would have.
func newEngine(cfg serveConfig, logger *slog.Logger) (engine.Engine, func(), error) {
	switch cfg.Engine {
	case "reference":
		// Every consumer in the server encodes or copies a chunk's samples
		// in its emit (as for the pool below), so they are reused.
		return engine.Metered(engine.Recycled(reference.New(reference.Options{RTF: cfg.ReferenceRTF}))), func() {}, nil
	case "espeak":
		local, err := espeak.New()
		if err != nil {
			return nil, nil, err
		}
		if err := local.Reproducible(); err != nil {
			logger.Warn("espeak-ng audio may depend on earlier requests", "reason", err)
		}
		// In this process, emit is the listener's own path: the first
		// buffer goes out at once. Worker children keep the default
		// (SetEagerFirstChunk says why).
		local.SetEagerFirstChunk(cfg.Workers == 0)
		// Every consumer in the server (synth.Run, the realtime sessions, the
		// clone preview) encodes or copies a chunk's samples in its emit.
		opts := engine.PoolOptions{Engine: local, Workers: 1, QueueDepth: cfg.QueueDepth, RecycleSamples: true,
			MaxLag: cfg.MaxLag}
		if cfg.Workers > 0 {
			self, err := os.Executable()
			if err != nil {
				return nil, nil, err
			}
			opts.Workers = cfg.Workers
			opts.WorkerDepth = worker.Depth
			opts.NewWorker = func(i int) (engine.Worker, error) {
				cmd := exec.Command(self, "engine-worker")
				cmd.Stderr = os.Stderr
				logger.Debug("engine worker starting", "worker", i)
				return worker.Start(cmd)
			}
		}
		pool, err := engine.NewPool(opts)
		if err != nil {
			return nil, nil, err
		}
		return pool, func() { pool.Close() }, nil
	}
	return nil, nil, fmt.Errorf("unknown engine %q", cfg.Engine)
}

// runEngineWorker is the child side of a pool worker subprocess: requests on
// stdin, audio on stdout, until stdin closes.
func runEngineWorker(stdin io.Reader, stdout, stderr io.Writer) int {
	e, err := espeak.New()
	if err != nil {
		fmt.Fprintf(stderr, "voicesvc engine-worker: %v\n", err)
		return 1
	}
	if err := worker.Serve(stdin, stdout, e); err != nil {
		fmt.Fprintf(stderr, "voicesvc engine-worker: %v\n", err)
		return 1
	}
	return 0
}

// discoverTimeout bounds listing an upstream's voices at start: a replica
// that does not answer by then adds no voices until the next start.
const discoverTimeout = 10 * time.Second

// newUpstreams builds the configured upstream engines and, for those with
// discover, lists their voices. A discovery that fails is logged, not
// fatal: the configured voices still serve.
func newUpstreams(ctx context.Context, cfgs []upstream.Config, logger *slog.Logger) ([]engine.Engine, func(), error) {
	var out []engine.Engine
	closeAll := func() {
		for _, e := range out {
			e.(*upstream.Engine).Close()
		}
	}
	for _, c := range cfgs {
		e, err := upstream.New(c)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		out = append(out, e)
		dctx, cancel := context.WithTimeout(ctx, discoverTimeout)
		n, err := e.Discover(dctx)
		cancel()
		if err != nil {
			logger.Warn("upstream voices not listed", "engine", c.Name, "err", err)
		}
		logger.Info("upstream engine", "engine", c.Name, "replicas", len(c.URLs), "voices", len(e.Catalog()), "discovered", n)
	}
	return out, closeAll, nil
}
