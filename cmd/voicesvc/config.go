package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"voicesvc/control"
	"voicesvc/engine/upstream"
	"voicesvc/lease"
)

// serveConfig is every setting of `voicesvc serve`. Each flag falls back to
// an environment variable, and everything is validated before anything starts.
type serveConfig struct {
	Addr    string
	DB      string
	BaseURL string
	Billing string
	// StoreTimeout bounds every store call; past it the call answers 503
	// store_unavailable, like a store that cannot be reached.
	StoreTimeout time.Duration

	Engine        string        // espeak | reference
	Workers       int           // engine worker processes (0: in-process, one worker)
	QueueDepth    int           // sentences waiting for a worker before upstream_busy
	MaxLag        time.Duration // new requests refused while the engine is this far behind (0: never)
	ReferenceRTF  float64       // reference engine pacing: 1 = real time, 0 = as fast as possible
	MediaDir      string        // where clone previews are written and served from
	IdleTimeout   time.Duration
	MaxConns      int // open connections at once; 0: the open-file limit less a reserve
	ShutdownGrace time.Duration
	LogLevel      slog.Level
	LogFormat     string // text | json
	// MetricsWorkspace: the billing and refusal series get a workspace label.
	MetricsWorkspace bool
	// TLSCert and TLSKey, both set, serve HTTPS and WSS on --addr (PEM
	// files; some official vendor clients dial only https and wss).
	TLSCert, TLSKey string

	// Leases count limits and charge characters in memory from leases of
	// the store (package lease; docs/api.md, "Running several servers").
	Leases bool
	Lease  lease.Config

	// ConfigFile is the YAML file read at start (--config); Engines are
	// the upstream engines it lists, beside the built-in one.
	ConfigFile string
	Engines    []upstream.Config
	// fileLines: for each flag the file set, "FILE:LINE: key", to say
	// where a value validate refuses came from.
	fileLines map[string]string
}

func parseServeConfig(args []string, stderr io.Writer) (serveConfig, error) {
	var c serveConfig
	fs := flag.NewFlagSet("voicesvc serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.Addr, "addr", "127.0.0.1:8080", "listen address (port 0 picks a free port); env VOICESVC_ADDR")
	fs.StringVar(&c.DB, "db", defaultDB, "store: sqlite://PATH or postgres://...; env VOICESVC_DB")
	fs.DurationVar(&c.StoreTimeout, "store-timeout", defaultStoreTimeout, "bound on every store call: a store that does not answer within it (hung, locked by another process, unreachable) gives 503 store_unavailable with Retry-After 1; env VOICESVC_STORE_TIMEOUT")
	fs.StringVar(&c.BaseURL, "base-url", "", "public base URL (for audio URLs); env VOICESVC_BASE_URL")
	fs.StringVar(&c.Billing, "billing", control.BillingEnforce, "default billing mode: off|meter|enforce; env VOICESVC_BILLING")
	fs.StringVar(&c.Engine, "engine", "espeak", "speech engine: espeak | reference (a tone, for measuring the gateway); env VOICESVC_ENGINE")
	fs.IntVar(&c.Workers, "engine-workers", runtime.NumCPU(), "engine worker subprocesses (0 = one in-process worker); env VOICESVC_ENGINE_WORKERS")
	fs.IntVar(&c.QueueDepth, "engine-queue", 4096, "synthesis requests admitted to the engine at once (running or waiting) before 503 upstream_busy; env VOICESVC_ENGINE_QUEUE")
	fs.DurationVar(&c.MaxLag, "engine-max-lag", 100*time.Millisecond, "graceful overload: refuse new synthesis (503 upstream_busy, task_failed upstream_busy) while the engine is this far behind schedule, so that admitted streams stay on time (0 = never refuse for capacity; at most 250ms); env VOICESVC_ENGINE_MAX_LAG")
	fs.Float64Var(&c.ReferenceRTF, "reference-rtf", 1, "reference engine pacing (1 = real time, 0 = unpaced); env VOICESVC_REFERENCE_RTF")
	fs.StringVar(&c.MediaDir, "media-dir", "./data/media", "directory for clone previews, served under /media/ (empty = off); env VOICESVC_MEDIA_DIR")
	fs.DurationVar(&c.IdleTimeout, "ws-idle-timeout", 600*time.Second, "realtime session idle timeout; env VOICESVC_WS_IDLE_TIMEOUT")
	fs.IntVar(&c.MaxConns, "max-conns", 0, "open connections at once, kept below the open-file limit (0 = that limit less a quarter, at least 256, for the store, media files and engine pipes); env VOICESVC_MAX_CONNS")
	fs.DurationVar(&c.ShutdownGrace, "shutdown-grace", 20*time.Second, "how long in-flight work may finish on SIGTERM; env VOICESVC_SHUTDOWN_GRACE")
	// slog.Level parses its own names (and offsets such as "warn+2"); an
	// unknown one is refused at start like any bad flag.
	fs.TextVar(&c.LogLevel, "log-level", slog.LevelInfo, "debug|info|warn|error; env VOICESVC_LOG_LEVEL")
	fs.StringVar(&c.LogFormat, "log-format", "text", "text (logfmt) or json (one object a line); env VOICESVC_LOG_FORMAT")
	fs.BoolVar(&c.MetricsWorkspace, "metrics-workspace-label", false, "label the billing and refusal series with the workspace id (one series per workspace); env VOICESVC_METRICS_WORKSPACE_LABEL")
	fs.StringVar(&c.TLSCert, "tls-cert", "", "serve TLS (https, wss) with this PEM certificate chain; needs --tls-key; env VOICESVC_TLS_CERT")
	fs.StringVar(&c.TLSKey, "tls-key", "", "the PEM private key of --tls-cert; env VOICESVC_TLS_KEY")
	fs.BoolVar(&c.Leases, "leases", true, "count concurrency and charge characters in memory from leases of the store, synced in batches (false: a store call per request); env VOICESVC_LEASES")
	fs.DurationVar(&c.Lease.TTL, "lease-ttl", lease.Defaults.TTL, "lifetime of a lease after its last renewal: what a server that dies or loses the store holds comes back after it; env VOICESVC_LEASE_TTL")
	fs.DurationVar(&c.Lease.Sync, "lease-sync", lease.Defaults.Sync, "how often usage is settled and leases resized and renewed (at most a third of --lease-ttl); env VOICESVC_LEASE_SYNC")
	fs.DurationVar(&c.Lease.Idle, "lease-idle", lease.Defaults.Idle, "a workspace without requests this long gives its leases back; env VOICESVC_LEASE_IDLE")
	fs.IntVar(&c.Lease.SlotBatch, "lease-slots", lease.Defaults.SlotBatch, "most concurrency slots a server holds beyond those in use (per workspace; also at most an eighth of the limit); env VOICESVC_LEASE_SLOTS")
	fs.Int64Var(&c.Lease.CharBatch, "lease-chars", lease.Defaults.CharBatch, "most characters a server reserves ahead (per workspace; also at most a quarter of the balance left); env VOICESVC_LEASE_CHARS")
	fs.IntVar(&c.Lease.ExactBelow, "lease-exact-below", lease.Defaults.ExactBelow, "slot and rps limits below this are shared exactly: a server holds only the slots in use, and counts each request in the store; env VOICESVC_LEASE_EXACT_BELOW")
	fs.IntVar(&c.Lease.RPSBatch, "lease-requests", lease.Defaults.RPSBatch, "most requests of a workspace's rps window a server takes at once (also at most an eighth of the limit); env VOICESVC_LEASE_REQUESTS")
	fs.DurationVar(&c.Lease.RPSFor, "lease-requests-for", lease.Defaults.RPSFor, "how long a server may use a share of the rps window after asking for it; env VOICESVC_LEASE_REQUESTS_FOR")
	fs.StringVar(&c.ConfigFile, "config", "", "YAML file with any of these settings (keys: the flag names, - or _) and the upstream engines (engines:); flags and environment override it; env VOICESVC_CONFIG")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	// Precedence: flag, then environment, then the file, then the default.
	set, fromFlag := map[string]bool{}, map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name], fromFlag[f.Name] = true, true })
	for name, variable := range serveEnv {
		if _, ok := os.LookupEnv(variable); ok {
			set[name] = true
		}
	}
	if err := applyEnv(fs, serveEnv); err != nil {
		return c, err
	}
	if c.ConfigFile != "" {
		if err := applyConfigFile(c.ConfigFile, fs, set, &c); err != nil {
			return c, err
		}
	}
	return c, c.where(c.validate(), fromFlag)
}

// serveEnv names the environment fallback of each flag.
var serveEnv = map[string]string{
	"addr": "VOICESVC_ADDR", "db": "VOICESVC_DB", "store-timeout": "VOICESVC_STORE_TIMEOUT", "base-url": "VOICESVC_BASE_URL",
	"billing": "VOICESVC_BILLING", "engine": "VOICESVC_ENGINE",
	"engine-workers": "VOICESVC_ENGINE_WORKERS", "engine-queue": "VOICESVC_ENGINE_QUEUE",
	"engine-max-lag": "VOICESVC_ENGINE_MAX_LAG", "reference-rtf": "VOICESVC_REFERENCE_RTF",
	"media-dir": "VOICESVC_MEDIA_DIR", "ws-idle-timeout": "VOICESVC_WS_IDLE_TIMEOUT",
	"shutdown-grace": "VOICESVC_SHUTDOWN_GRACE", "max-conns": "VOICESVC_MAX_CONNS",
	"log-level": "VOICESVC_LOG_LEVEL", "log-format": "VOICESVC_LOG_FORMAT",
	"metrics-workspace-label": "VOICESVC_METRICS_WORKSPACE_LABEL",
	"tls-cert":                "VOICESVC_TLS_CERT", "tls-key": "VOICESVC_TLS_KEY",
	"config": "VOICESVC_CONFIG", "leases": "VOICESVC_LEASES", "lease-ttl": "VOICESVC_LEASE_TTL",
	"lease-sync": "VOICESVC_LEASE_SYNC", "lease-idle": "VOICESVC_LEASE_IDLE", "lease-slots": "VOICESVC_LEASE_SLOTS",
	"lease-chars": "VOICESVC_LEASE_CHARS", "lease-exact-below": "VOICESVC_LEASE_EXACT_BELOW",
	"lease-requests": "VOICESVC_LEASE_REQUESTS", "lease-requests-for": "VOICESVC_LEASE_REQUESTS_FOR",
}

// applyEnv sets every flag not given on the command line from its
// environment variable, through the flag's own parser, so a bad value in the
// environment is an error at start just like a bad flag.
func applyEnv(fs *flag.FlagSet, vars map[string]string) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, variable := range vars {
		v, ok := os.LookupEnv(variable)
		if !ok || given[name] {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %v", variable, v, err)
		}
	}
	return nil
}

// maxEngineLag bounds --engine-max-lag: a continuation is due 250 ms
// before its listener runs out of audio (engine.Pool), so a pool let fall
// further behind than that before refusing would make admitted streams
// late, which the limit is there to prevent.
const maxEngineLag = 250 * time.Millisecond

func (c serveConfig) validate() error {
	switch {
	case !control.ValidBilling(c.Billing):
		return badSetting("billing", fmt.Sprintf("%q", c.Billing), "want off, meter or enforce")
	case c.Engine != "espeak" && c.Engine != "reference":
		return badSetting("engine", fmt.Sprintf("%q", c.Engine), "want espeak or reference")
	case c.Workers < 0 || c.Workers > 256:
		return badSetting("engine-workers", fmt.Sprint(c.Workers), "want 0-256")
	case c.QueueDepth < 1:
		return badSetting("engine-queue", fmt.Sprint(c.QueueDepth), "want at least 1")
	case c.MaxLag < 0 || c.MaxLag > maxEngineLag:
		return badSetting("engine-max-lag", c.MaxLag.String(), fmt.Sprintf("want 0 (off) to %v", maxEngineLag))
	case c.ReferenceRTF < 0:
		return badSetting("reference-rtf", fmt.Sprintf("%g", c.ReferenceRTF), "want 0 or more")
	case c.StoreTimeout <= 0 || c.StoreTimeout > maxStoreTimeout:
		return badSetting("store-timeout", c.StoreTimeout.String(), fmt.Sprintf("want more than 0, at most %v", maxStoreTimeout))
	case c.IdleTimeout <= 0:
		return badSetting("ws-idle-timeout", c.IdleTimeout.String(), "must be positive")
	case c.MaxConns < 0:
		return badSetting("max-conns", fmt.Sprint(c.MaxConns), "want 0 (automatic) or more")
	case c.LogFormat != "text" && c.LogFormat != "json":
		return badSetting("log-format", fmt.Sprintf("%q", c.LogFormat), "want text or json")
	case c.Lease.TTL < 100*time.Millisecond:
		return badSetting("lease-ttl", c.Lease.TTL.String(), "want at least 100ms")
	case c.Lease.Sync <= 0 || c.Lease.Sync > c.Lease.TTL/3:
		return badSetting("lease-sync", c.Lease.Sync.String(), "want more than 0, at most a third of --lease-ttl")
	case c.Lease.Idle <= 0:
		return badSetting("lease-idle", c.Lease.Idle.String(), "must be positive")
	case c.Lease.SlotBatch < 1:
		return badSetting("lease-slots", fmt.Sprint(c.Lease.SlotBatch), "want at least 1")
	case c.Lease.CharBatch < 1:
		return badSetting("lease-chars", fmt.Sprint(c.Lease.CharBatch), "want at least 1")
	case c.Lease.ExactBelow < 1:
		return badSetting("lease-exact-below", fmt.Sprint(c.Lease.ExactBelow), "want at least 1")
	case c.Lease.RPSBatch < 1:
		return badSetting("lease-requests", fmt.Sprint(c.Lease.RPSBatch), "want at least 1")
	case c.Lease.RPSFor < 10*time.Millisecond || c.Lease.RPSFor > time.Second:
		return badSetting("lease-requests-for", c.Lease.RPSFor.String(), "want 10ms to 1s")
	case (c.TLSCert == "") != (c.TLSKey == ""):
		return badSetting("tls-key", fmt.Sprintf("%q", c.TLSKey), "--tls-cert and --tls-key go together")
	}
	if c.TLSCert != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey); err != nil {
			return badSetting("tls-cert", fmt.Sprintf("%q", c.TLSCert), err.Error())
		}
	}
	return nil
}

// settingError is a value validate refuses: flag names the setting, value
// is the value as shown. It reads as a flag error ("--billing "maybe":
// want ..."); parseServeConfig says where the value came from when that was
// the environment or the file.
type settingError struct{ flag, value, reason string }

func badSetting(flag, value, reason string) error { return &settingError{flag, value, reason} }

func (e *settingError) Error() string { return fmt.Sprintf("--%s %s: %s", e.flag, e.value, e.reason) }

// where rewrites a settingError for a value that came from the environment
// (VOICESVC_BILLING="maybe": ...) or the file (voicesvc.yaml:7: billing
// "maybe": ...); any other error is returned as it is.
func (c serveConfig) where(err error, fromFlag map[string]bool) error {
	var se *settingError
	if !errors.As(err, &se) || fromFlag[se.flag] {
		return err
	}
	if v, ok := serveEnv[se.flag]; ok {
		if raw, ok := os.LookupEnv(v); ok {
			return fmt.Errorf("%s=%q: %s", v, raw, se.reason)
		}
	}
	if at, ok := c.fileLines[se.flag]; ok {
		return fmt.Errorf("%s %s: %s", at, se.value, se.reason)
	}
	return err
}
