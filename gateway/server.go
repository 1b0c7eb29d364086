// Package gateway is the HTTP face of voicesvc: a fasthttp server with the
// routes of docs/api.md under /voice-svc/api/v1/public, plus /healthz,
// /readyz and /metrics at the root.
//
// The server holds no resource of its own: the protocol packages (package
// web) register every API route, the native resources included
// (dialect/native), and the core (synth.Service) holds their rules. Request
// ids, CORS, authentication and scope checks, the request rate, metrics
// and the access log are done by the route wrapper (middleware.go), so
// handlers never repeat them. Errors are *control.Error values (status from
// the code table in web/status.go); anything else is answered 500 and
// logged (writeError).
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/trace"

	"voicesvc/control"
	"voicesvc/dialect/cartesia"
	"voicesvc/dialect/deepgram"
	"voicesvc/dialect/elevenlabs"
	"voicesvc/dialect/native"
	"voicesvc/dialect/openai"
	"voicesvc/engine"
	"voicesvc/lease"
	"voicesvc/loopback"
	"voicesvc/netguard"
	"voicesvc/redact"
	"voicesvc/synth"
	"voicesvc/web"
)

// APIRoot is the path prefix of every public API route.
const APIRoot = web.APIRoot

// Config tunes the HTTP server. Zero fields take the defaults of
// DefaultConfig, so Config{} is a working configuration.
type Config struct {
	// ReadTimeout bounds reading one request (headers and body) on JSON
	// routes: 30 s is generous for 256 KiB, and it is also the longest a
	// new connection may stay silent. Upload bodies are read by the
	// handler: each read must come within UploadIdleTimeout of the last
	// (30 s: a body that stops arriving is dropped) and the whole body
	// within UploadReadTimeout (5 min: 21 MiB at 72 KB/s).
	ReadTimeout       time.Duration
	UploadIdleTimeout time.Duration
	UploadReadTimeout time.Duration
	// WriteTimeout bounds writing one response: 60 s, as answers under it
	// are JSON of a few KiB or preview clips of a few hundred KiB, and a
	// client that reads slower holds a connection for nothing. fasthttp
	// applies it to the whole response, streamed bodies included, so SSE,
	// speak and compat routes get StreamWriteTimeout instead: the longest a
	// single stream may run. A streaming writer must still stop on its
	// first failed write.
	WriteTimeout       time.Duration
	StreamWriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle for this long: 2 min
	// outlasts the keep-alive pools of common clients and proxies (60-90
	// s), so they close first and never send into a closing socket, while
	// an idle connection holds its descriptor and its 24 KiB of buffers
	// for a bounded time.
	IdleTimeout time.Duration
	// ReadBufferSize is the per-connection read buffer; fasthttp refuses
	// request headers that do not fit in it, so it is the header size limit.
	ReadBufferSize int
	// WriteBufferSize is the per-connection write buffer. fasthttp copies a
	// streamed body in 4 KiB pieces and frames each as an HTTP chunk; with
	// its default 4 KiB buffer every piece took two writes (4,096 bytes,
	// then 8), so an SSE response crossed the socket as twice the segments.
	// 8 KiB holds a piece and its framing: one write each (SSE c16 p99
	// time to first byte 2.6-3.2 -> 1.8-2.3 ms, BenchmarkSynthTTFB).
	WriteBufferSize int
	// MaxJSONBody caps JSON request bodies (speak text is at most 10,000
	// characters, so 256 KiB leaves room for escapes); MaxUploadBody caps
	// multipart uploads (21 MiB: a 20 MiB clip and its form). Larger
	// bodies answer 413, announced or not.
	MaxJSONBody   int
	MaxUploadBody int
	// MaxUploads caps the uploads being received or stored at once (64);
	// beyond it an upload answers 503 upstream_busy with Retry-After
	// before its body is read (the core's AdmitUpload). Each holds a
	// temporary file and its connection; the memory of a clip read back
	// for the store is bounded separately (synth/enroll.go).
	MaxUploads int
	// UploadDir holds the uploads' temporary files (unlinked at once, so
	// nothing stays there); "": the system's temporary directory.
	UploadDir string
	// MaxConns caps the connections open at once (package netguard); 0:
	// the open-file limit less a reserve (netguard.DefaultMaxConns).
	MaxConns int
	// KeyCacheMB sizes the API-key cache. KeyCacheTTL bounds how long a
	// cached key is trusted even if the change feed stayed silent;
	// NegativeKeyTTL how long an unknown key is remembered as unknown.
	KeyCacheMB     int
	KeyCacheTTL    time.Duration
	NegativeKeyTTL time.Duration
	// VoiceCacheTTL bounds how stale a cached voice may be on this server
	// when another process changed it without a change-feed event.
	VoiceCacheTTL time.Duration
	// SSEChunk is the audio per SSE chunk event after the first, which
	// leaves at once; 0: synth.DefaultCoalesce (40 ms).
	SSEChunk time.Duration
	// WSIdleTimeout ends a realtime session without client messages or
	// synthesis for this long (session_ended idle); 0: 600 s (ws.go).
	WSIdleTimeout time.Duration
	// WSFirstMessageTimeout bounds the wait for the first message of a
	// socket that brings its credentials in it; 0: 5 s (sessions.FirstMessage).
	WSFirstMessageTimeout time.Duration
	// TLSCert and TLSKey, both set, make Serve answer TLS (HTTP/1.1 and
	// WebSockets over it) with these PEM files.
	TLSCert, TLSKey string
	// MetricsWorkspaceLabel adds a workspace label to the billing and
	// refusal series (docs/api.md#metrics): one series per workspace, so
	// only where workspaces are few.
	MetricsWorkspaceLabel bool
}

// DefaultConfig returns the defaults used for zero Config fields.
func DefaultConfig() Config {
	return Config{
		ReadTimeout:        30 * time.Second,
		UploadIdleTimeout:  30 * time.Second,
		UploadReadTimeout:  5 * time.Minute,
		WriteTimeout:       60 * time.Second,
		StreamWriteTimeout: time.Hour,
		IdleTimeout:        2 * time.Minute,
		ReadBufferSize:     16 << 10,
		WriteBufferSize:    8 << 10,
		MaxJSONBody:        256 << 10,
		MaxUploadBody:      21 << 20,
		MaxUploads:         64,
		KeyCacheMB:         64,
		KeyCacheTTL:        5 * time.Minute,
		NegativeKeyTTL:     2 * time.Second,
		VoiceCacheTTL:      30 * time.Second,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	set := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	set(&c.ReadTimeout, d.ReadTimeout)
	set(&c.UploadIdleTimeout, d.UploadIdleTimeout)
	set(&c.UploadReadTimeout, d.UploadReadTimeout)
	set(&c.WriteTimeout, d.WriteTimeout)
	set(&c.StreamWriteTimeout, d.StreamWriteTimeout)
	set(&c.IdleTimeout, d.IdleTimeout)
	set(&c.KeyCacheTTL, d.KeyCacheTTL)
	set(&c.NegativeKeyTTL, d.NegativeKeyTTL)
	set(&c.VoiceCacheTTL, d.VoiceCacheTTL)
	setInt(&c.ReadBufferSize, d.ReadBufferSize)
	setInt(&c.WriteBufferSize, d.WriteBufferSize)
	setInt(&c.MaxJSONBody, d.MaxJSONBody)
	setInt(&c.MaxUploadBody, d.MaxUploadBody)
	setInt(&c.MaxUploads, d.MaxUploads)
	if c.MaxConns <= 0 {
		c.MaxConns = netguard.DefaultMaxConns(netguard.FileLimit())
	}
	setInt(&c.KeyCacheMB, d.KeyCacheMB)
	return c
}

// Deps are the collaborators of the server. Store is required.
type Deps struct {
	Store  control.Store
	Engine engine.Engine // the built-in engine; nil until wired: /readyz answers 503
	// Engines renders each voice with the engine it names (Voice.Engine);
	// nil: a registry of Engine alone.
	Engines *engine.Registry
	Limiter control.Limiter // used by the synthesis routes; nil: in-process
	Meter   control.Meter   // synthesis billing; nil: control.NewMeter(Store, Billing)
	// Leases, when set, count slots and charge characters in memory from
	// leases of the store (package lease); Limiter then only counts
	// request rates. nil: every limit and charge is a store call.
	Leases *lease.Config
	Logger *slog.Logger // nil: slog.Default()
	// Billing is the server's default billing mode (control.Billing*);
	// a workspace may override it. "" means enforce.
	Billing string
	// BaseURL is the public address of the service (sample and audio URLs).
	BaseURL string
	// MediaDir holds clone previews, served publicly under /media/
	// (dialect/native/media.go); "" serves nothing.
	MediaDir string
	// JobQueued is called after an enroll or clone stored a job, so that
	// the job runner claims it without waiting for its poll; nil: none.
	JobQueued func()
	// Registry receives the server's metrics and is served on /metrics;
	// nil: a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// TracerProvider, when set, traces requests and realtime contexts
	// (tracing.go); nil: tracing is off and costs nothing.
	TracerProvider trace.TracerProvider
	// Protocols are the protocol packages the server answers (package
	// web); nil: the native protocol and the OpenAI and ElevenLabs dialects.
	Protocols []web.Protocol
}

// Server is the HTTP server. Create it with New, run it with Serve, stop it
// with Shutdown (which also stops its background work, so call it even if
// Serve never ran).
type Server struct {
	cfg     Config
	store   control.Store
	engine  engine.Engine    // the built-in engine (languages of new voices)
	engines *engine.Registry // every engine, by name; nil without an engine
	log     *slog.Logger
	billing string
	baseURL string

	router   *router.Router
	apiGroup *router.Group // the routes under APIRoot
	http     *fasthttp.Server
	// protocols answer their routes (host.go); prefixes choose the error
	// shape of a path (envelope.go); streamPaths and uploadPaths are the
	// literal tails of the routes that stream and of the uploads
	// (requestConfig).
	protocols   []web.Protocol
	prefixes    []protoPrefix
	streamPaths []string
	// streamPrefixes know the streaming routes whose path ends in a
	// parameter: the literal part before it (isStreamPath).
	streamPrefixes []string
	uploadPaths    []string
	metrics        *metrics
	// errorRoute labels requests fasthttp refused before routing.
	errorRoute *route
	core       *synth.Service // the application core: voices, admission, jobs
	synth      synthState     // admission.go
	ws         *wsState       // ws.go
	tracer     trace.Tracer   // tracing.go; nil: off
	drain      drainState     // drain.go: Shutdown
	// tooLarge notes the requests whose Content-Length was over their
	// limit (requestConfig): *fasthttp.RequestHeader -> the length.
	tooLarge sync.Map

	stopWatch context.CancelFunc
	leases    *lease.Manager // nil without Deps.Leases
	watchDone chan struct{}
	stopOnce  sync.Once

	// lns and closed close the race of a Shutdown that runs before Serve
	// has handed its listener to fasthttp, which would then serve forever.
	mu     sync.Mutex
	lns    []net.Listener
	closed bool
}

// New builds a server; it starts the goroutine that follows the store's
// change feed to keep the auth and voice caches fresh.
func New(cfg Config, deps Deps) (*Server, error) {
	if deps.Store == nil {
		return nil, errors.New("gateway: Deps.Store is required")
	}
	if deps.Billing == "" {
		deps.Billing = control.BillingEnforce
	}
	if !control.ValidBilling(deps.Billing) {
		return nil, fmt.Errorf("gateway: unknown billing mode %q", deps.Billing)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	deps.Logger = redact.Logger(deps.Logger) // a no-op when it already redacts
	cfg = cfg.withDefaults()
	s := &Server{
		cfg: cfg, store: deps.Store, engine: deps.Engine,
		log: deps.Logger, billing: deps.Billing, baseURL: deps.BaseURL,
		protocols: deps.Protocols,
	}
	if deps.TracerProvider != nil {
		s.tracer = deps.TracerProvider.Tracer("voicesvc/gateway")
	}
	var err error
	if s.engines = deps.Engines; s.engines == nil && deps.Engine != nil {
		if s.engines, err = engine.NewRegistry(deps.Engine); err != nil {
			return nil, err
		}
	}
	if s.metrics, err = newMetrics(deps.Registry); err != nil {
		return nil, err
	}
	if err = s.initSynthesis(deps); err != nil {
		return nil, err
	}
	if s.protocols == nil {
		s.protocols = []web.Protocol{
			native.New(native.Config{SSEChunk: cfg.SSEChunk, Session: s.sessionConfig(), UploadDir: cfg.UploadDir}),
			openai.New(openai.Config{SSEChunk: cfg.SSEChunk}),
			cartesia.New(cartesia.Config{SSEChunk: cfg.SSEChunk, Session: s.sessionConfig()}),
			deepgram.New(deepgram.Config{Session: s.sessionConfig()}),
			elevenlabs.New(elevenlabs.Config{Session: s.sessionConfig()}),
		}
	}
	s.routes()
	s.http = &fasthttp.Server{
		Handler:        s.serveHTTP, // the drain (drain.go), then the body (body.go), then the router
		ErrorHandler:   s.serveError,
		HeaderReceived: s.requestConfig, // per-route timeouts and body limits
		ReadTimeout:    cfg.ReadTimeout,
		WriteTimeout:   cfg.WriteTimeout,
		IdleTimeout:    cfg.IdleTimeout,
		// Read and write buffers: see Config; together with the body
		// (MaxJSONBody, or the upload's few buffers) they are what one
		// connection holds, well under 1 MiB.
		ReadBufferSize:  cfg.ReadBufferSize,
		WriteBufferSize: cfg.WriteBufferSize,
		// Bodies are streamed: before the handler runs fasthttp reads at
		// most 8 KiB of a body (one byte of an upload, requestConfig),
		// whatever the Content-Length says, and the handler reads the
		// rest. Without it fasthttp sized its buffer by the declared
		// length before reading: 100 connections declaring 20 MB and
		// sending one byte each took the server from 32 MiB to 3.2 GiB,
		// before any authentication; now 200 such connections (100 with
		// a key) take it from 33 to 40 MiB (e2e
		// TestAnnouncedUploadsReserveNothing). serveBody reads JSON
		// bodies up to MaxJSONBody; uploads are received by their
		// handlers after authentication (uploadbody.go, web.Host.UploadBody).
		StreamRequestBody:  true,
		MaxRequestBodySize: cfg.MaxJSONBody,
		// The listener already caps open connections (netguard); the
		// same number here keeps fasthttp from refusing a connection the
		// listener admitted. No per-IP cap (MaxConnsPerIP): behind a
		// reverse proxy every client has the proxy's address.
		Concurrency:                  cfg.MaxConns,
		DisablePreParseMultipartForm: true, // upload handlers parse, so errors use the envelope
		NoDefaultServerHeader:        true,
		CloseOnShutdown:              true,
		// TCP keep-alive: Go's listener turns it on for every accepted
		// connection (15 s); fasthttp's own switch only sees bare
		// *net.TCPConn, which netguard's connections are not.
		Logger: fasthttpLogger{s.log},
		// A WebSocket session runs on its own goroutine and closes its
		// socket itself, so the hijack handler returns at once and fasthttp
		// frees the request's memory (gateway/ws.go, upgrade).
		KeepHijackedConns: true,
	}

	watchCtx, cancel := context.WithCancel(context.Background())
	s.stopWatch, s.watchDone = cancel, make(chan struct{})
	go func() {
		defer close(s.watchDone)
		defer s.core.Close()
		s.core.Follow(watchCtx, s.changeFeed(), s.ws.keyChanged, s.ws.recheck)
	}()
	return s, nil
}

// Handler is the server's request handler, for tests and embedding.
// Timeouts and the connection cap are applied by Serve, not by it.
func (s *Server) Handler() fasthttp.RequestHandler { return s.serveHTTP }

// Serve answers requests on ln until Shutdown, then returns nil.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	// A local reverse proxy or client must not get its audio paced
	// (package loopback); open connections stay under the file limit and
	// running out of descriptors is waited out (package netguard).
	guarded := netguard.Listen(loopback.Listener(ln), netguard.Options{
		MaxConns: s.cfg.MaxConns,
		Logf: func(format string, args ...any) {
			s.log.Warn("listener", "msg", fmt.Sprintf(format, args...))
		},
	})
	if s.cfg.TLSCert != "" {
		// Over TLS a hangup is seen at the next write (the watch peeks
		// at the TCP socket, which holds records, not requests), and
		// WebSocket sessions read on a goroutine of their own (the
		// poller watches sockets, not TLS records).
		return s.http.ServeTLS(guarded, s.cfg.TLSCert, s.cfg.TLSKey)
	}
	return s.http.Serve(guarded)
}

// requestConfig runs once the headers of a request are read, before its
// body: uploads may be large and slow, streams may run long, and everything
// else is small JSON. Bodies are streamed (New): the limit returned here
// only bounds what fasthttp reads before the handler, which enforces the
// route's real limit as it reads the rest (serveBody, uploadbody.go). For an
// upload that is one byte (0 would mean fasthttp's default), so that the
// key is checked before the body is read; for JSON routes 8 KiB, which
// most bodies fit. An upload's first byte must come within
// UploadIdleTimeout; its handler moves the deadline as the body arrives.
//
// A Content-Length over the route's limit is answered 413 from the headers
// alone: fasthttp is told there is no body, so it reads none and sends no
// `100 Continue`, and serveBody answers from the length noted in tooLarge,
// then closes the connection.
func (s *Server) requestConfig(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	path := h.RequestURI()
	if i := indexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	limit := s.cfg.MaxJSONBody
	c := fasthttp.RequestConfig{MaxRequestBodySize: s.cfg.MaxJSONBody}
	switch {
	case s.isUploadPath(path):
		limit = s.cfg.MaxUploadBody
		c = fasthttp.RequestConfig{MaxRequestBodySize: 1, ReadTimeout: s.cfg.UploadIdleTimeout}
	case s.isStreamPath(path):
		c.WriteTimeout = s.cfg.StreamWriteTimeout
	}
	if n := h.ContentLength(); n > limit {
		s.tooLarge.Store(h, n)
		h.SetContentLength(0)
		h.Del("Expect")
	} else {
		// A note left by a request that never reached serveHTTP (its
		// connection failed) must not refuse the next one to reuse h.
		s.tooLarge.Delete(h)
	}
	return c
}

// isUploadPath: the routes registered with web.Route.Upload (enroll,
// clone); isStreamPath: responses written while audio is generated, which
// can outlast WriteTimeout, the routes registered with web.Route.Streams
// (speak, SSE, the compatible endpoint, the WebSocket upgrade). Both by
// the literal tail of their path; a streaming route whose path ends in its
// parameter by the literal part before it, then one segment.
func (s *Server) isUploadPath(p []byte) bool { return hasTail(p, s.uploadPaths) }
func (s *Server) isStreamPath(p []byte) bool {
	return hasTail(p, s.streamPaths) || hasPrefixSegment(p, s.streamPrefixes)
}

func hasTail(p []byte, tails []string) bool {
	for _, tail := range tails {
		if hasSuffix(p, tail) {
			return true
		}
	}
	return false
}

// hasPrefixSegment: p is one of prefixes then one path segment.
func hasPrefixSegment(p []byte, prefixes []string) bool {
	for _, prefix := range prefixes {
		if len(p) > len(prefix) && string(p[:len(prefix)]) == prefix && bytes.IndexByte(p[len(prefix):], '/') < 0 {
			return true
		}
	}
	return false
}

// serveError answers requests refused before any handler ran: by fasthttp
// (headers over the read buffer, read timeouts, malformed requests) or by
// serveHTTP (JSON bodies over the limit). The connection is closed after
// the answer, lingering: the client may still be sending.
func (s *Server) serveError(ctx *fasthttp.RequestCtx, err error) {
	if silentTimeout(ctx, err) {
		// Nothing was asked: close without an answer, as fasthttp does for
		// an idle keep-alive connection. A 400 written here would be read
		// by the client as the answer to the request it sends next on
		// this connection it thinks idle (Go's net/http logs
		// "Unsolicited response received on idle HTTP channel").
		ctx.Conn().Close()
		return
	}
	dropConnection(ctx)
	rt := s.errorRoute
	start := time.Now()
	s.begin(ctx, rt)
	var e *control.Error
	var small *fasthttp.ErrSmallBuffer
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		e = control.Errorf(control.EPayloadTooLarge, "request body too large")
	case errors.As(err, &small):
		e = control.Errorf(control.EInvalidRequest, "request headers too large")
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			e = control.Errorf(control.EInvalidRequest, "timed out reading the request")
		} else {
			e = control.Errorf(control.EInvalidRequest, "cannot parse the request")
		}
	}
	s.writeError(ctx, e)
	s.finish(ctx, rt, start)
}

// silentTimeout: err is the read timeout of a connection on which the
// client never sent a byte.
func silentTimeout(ctx *fasthttp.RequestCtx, err error) bool {
	var ne net.Error
	c, ok := ctx.Conn().(*netguard.Conn)
	return ok && c.Silent() && errors.As(err, &ne) && ne.Timeout()
}

// fasthttpLogger sends fasthttp's own messages to slog. fasthttp quotes the
// read buffer of a request whose headers it could not parse ("Buffer
// size=N, contents: ..."): the first and last 200 bytes, cut anywhere, so a
// key split at the cut cannot be recognized by its shape. Those contents are
// dropped whole; the rest of the message still goes through the redactor.
type fasthttpLogger struct{ l *slog.Logger }

func (f fasthttpLogger) Printf(format string, args ...any) {
	f.l.Warn("fasthttp", "msg", fasthttpMessage(fmt.Sprintf(format, args...)))
}

const bufferContents = ", contents: "

func fasthttpMessage(msg string) string {
	if i := strings.Index(msg, bufferContents); i >= 0 {
		msg = msg[:i+len(bufferContents)] + "(not logged: request bytes may hold credentials)"
	}
	return redact.String(msg)
}
