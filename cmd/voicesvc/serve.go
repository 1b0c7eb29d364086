package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"

	"voicesvc/cloning"
	"voicesvc/control"
	"voicesvc/control/postgres"
	"voicesvc/dialect/cartesia"
	"voicesvc/dialect/deepgram"
	"voicesvc/dialect/elevenlabs"
	"voicesvc/dialect/native"
	"voicesvc/dialect/openai"
	"voicesvc/engine"
	"voicesvc/gateway"
	"voicesvc/lease"
	"voicesvc/netguard"
	"voicesvc/redact"
	"voicesvc/sessions"
	"voicesvc/synth"
	"voicesvc/web"
)

func runServe(ctx context.Context, args []string, stderr io.Writer) int {
	cfg, err := parseServeConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "voicesvc serve: %v\n", err)
		return 2
	}
	logger := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	procs := applyServeProcs(os.Getenv("GOMAXPROCS"))
	logger.Debug("scheduler", "gomaxprocs", procs)
	if err := serve(ctx, cfg, logger, stderr); err != nil {
		logger.Error("voicesvc stopped", "err", err)
		return 1
	}
	return 0
}

// serve wires the concrete store, engine, limiter and meter into the gateway
// and runs until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, cfg serveConfig, logger *slog.Logger, stderr io.Writer) error {
	maxConns := connectionCap(cfg.MaxConns, logger)
	store, err := openStore(ctx, cfg.DB, cfg.StoreTimeout)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer store.Close()

	eng, closeEngine, err := newEngine(cfg, logger)
	if err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	defer closeEngine()

	upstreams, closeUpstreams, err := newUpstreams(ctx, cfg.Engines, logger)
	if err != nil {
		return fmt.Errorf("engines: %w", err)
	}
	defer closeUpstreams()
	engines, err := engine.NewRegistry(eng, upstreams...)
	if err != nil {
		return fmt.Errorf("engines: %w", err)
	}

	if err := synth.SeedCatalog(ctx, store, eng, upstreams...); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}

	limiter, closeLimiter := newLimiter(store)
	defer closeLimiter()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	baseURL := cfg.BaseURL
	if baseURL == "" {
		baseURL = "http://" + ln.Addr().String()
	}

	// Clone jobs run in this process; with Postgres, every server claims
	// from the same queue.
	runner := cloning.New(store, eng, cloning.FromEnv(cloning.Options{
		MediaDir: cfg.MediaDir, BaseURL: baseURL, Logger: logger}))
	runner.Start(ctx)
	defer runner.Stop()

	tracer, stopTracing, err := newTracing(ctx, logger) // off unless OTEL_EXPORTER_OTLP_* say otherwise
	if err != nil {
		return err
	}
	defer stopTracing()

	srv, err := gateway.New(gateway.Config{WSIdleTimeout: cfg.IdleTimeout, MaxConns: maxConns,
		MetricsWorkspaceLabel: cfg.MetricsWorkspace, TLSCert: cfg.TLSCert, TLSKey: cfg.TLSKey}, gateway.Deps{
		Store:     store,
		Engine:    eng,
		Engines:   engines,
		Limiter:   limiter,
		Leases:    leaseConfig(cfg),
		Logger:    logger,
		Billing:   cfg.Billing,
		BaseURL:   baseURL,
		MediaDir:  cfg.MediaDir,
		JobQueued: runner.Wake,
		// A nil interface when off, never a nil pointer in one.
		TracerProvider: tracer,
		// The protocols served: voicesvc's own and the dialects.
		Protocols: []web.Protocol{
			native.New(native.Config{Session: sessions.Config{IdleTimeout: cfg.IdleTimeout}}),
			openai.New(openai.Config{}),
			cartesia.New(cartesia.Config{Session: sessions.Config{IdleTimeout: cfg.IdleTimeout}}),
			deepgram.New(deepgram.Config{Session: sessions.Config{IdleTimeout: cfg.IdleTimeout}}),
			elevenlabs.New(elevenlabs.Config{Session: sessions.Config{IdleTimeout: cfg.IdleTimeout}}),
		},
	})
	if err != nil {
		return err
	}

	// Tests and scripts read the bound address from this line.
	scheme := "http"
	if cfg.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(stderr, "voicesvc listening on %s://%s\n", scheme, ln.Addr())
	logger.Info("serving", "addr", ln.Addr().String(), "db", redactDSN(cfg.DB), "engine", eng.Name(), "upstreams", len(upstreams), "billing", cfg.Billing,
		"max_conns", maxConns)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Draining: new requests get 503 shutting_down, running work has the
	// grace, streams still running then end with shutting_down; a drain
	// that went that way is a clean stop (exit 0).
	logger.Info("shutting down", "grace", cfg.ShutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// connectionCap raises the soft limit on open files to the hard one (every
// connection, store file, media file and worker pipe is a descriptor), and
// returns the connection cap: the flag's, or the raised limit less a
// reserve. A cap at or over the limit is allowed, with a warning: accept
// then runs out of descriptors, which the listener waits out.
func connectionCap(flagValue int, logger *slog.Logger) int {
	limit, err := netguard.RaiseFileLimit()
	if err != nil {
		logger.Warn("cannot raise the open-file limit", "limit", limit, "err", err)
	}
	if flagValue == 0 {
		return netguard.DefaultMaxConns(limit)
	}
	if limit > 0 && uint64(flagValue) >= limit {
		logger.Warn("--max-conns is not below the open-file limit: connections can exhaust the descriptors",
			"max_conns", flagValue, "file_limit", limit)
	}
	return flagValue
}

// newLimiter counts limits in-process for a single server (SQLite), or in
// the store when it is shared by several servers (Postgres leases, renewed
// while held; closing stops the renewals).
func newLimiter(store control.Store) (control.Limiter, func()) {
	if pg, ok := store.(*postgres.DB); ok {
		l := pg.Limiter(control.NewID())
		return l, l.Close
	}
	return control.NewMemoryLimiter(), func() {}
}

// leaseConfig is the lease bounds when leases are on, else nil.
func leaseConfig(cfg serveConfig) *lease.Config {
	if !cfg.Leases {
		return nil
	}
	c := cfg.Lease
	return &c
}

// newLogger is the process's one logger: every line passes the redactor,
// whoever writes it (the HTTP library's messages quote request bytes, keys
// and tokens included). It also becomes slog's and the log package's
// default, so that nothing logs around it.
func newLogger(w io.Writer, level slog.Level, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	logger := slog.New(redact.NewHandler(h))
	slog.SetDefault(logger)
	return logger
}

// redactDSN hides a password in a postgres URL before it is logged.
func redactDSN(dsn string) string {
	at := strings.LastIndex(dsn, "@")
	scheme := strings.Index(dsn, "://")
	if at < 0 || scheme < 0 {
		return dsn
	}
	creds := dsn[scheme+3 : at]
	if i := strings.Index(creds, ":"); i >= 0 {
		return dsn[:scheme+3] + creds[:i] + ":xxxxx" + dsn[at:]
	}
	return dsn
}
