package synth

import (
	"context"
	"log/slog"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
)

// Service is the application core: every synthesis, whatever protocol it
// arrives in, goes through it from an authenticated principal to its last
// byte (docs/api.md#limits; README "Architecture"):
//
//	Voice (lookup, access, ready) -> Prepare (engine, language, settings,
//	codec pipeline) -> Admit (feature, slots, charge, token) -> Job.Run ->
//	Job.Finish (refund when nothing was produced, slots freed)
//
// A protocol package decodes its wire shape into Options (Parse with its
// Rules), calls Begin, runs the job into its own framing and calls Finish.
// It holds no rule about access, limits, billing or validation: those are
// here, once. Nothing here knows HTTP or sockets, so every ending is tested
// with a fake engine and a fake store (service_test.go).
type Service struct {
	store   Store
	voices  *VoiceCache
	engines *engine.Registry
	builtin engine.Engine
	limiter control.Limiter
	meter   control.Meter
	hooks   Hooks
	log     *slog.Logger
	timeout time.Duration
	keys    *keyCache
	billing string // the server's default billing mode

	res       Resources // the resource operations' store (voices.go)
	uploads   *uploads  // enroll.go
	mediaDir  string
	jobQueued func()
}

// VoiceStore is where voices are read on a cache miss.
type VoiceStore interface {
	// GetVoice returns any voice by id (ENotFound when unknown).
	GetVoice(ctx context.Context, id string) (*control.Voice, error)
	// GetVoiceByAlias returns the public catalog voice with alias.
	GetVoiceByAlias(ctx context.Context, alias string) (*control.Voice, error)
}

// VoiceLister pages through the voices a workspace may see.
type VoiceLister interface {
	ListVoices(ctx context.Context, f control.VoiceFilter) ([]*control.Voice, int, error)
}

// Store is what the core reads and writes in the store: voices, workspace
// aliases, and the one write of an access token's single use.
type Store interface {
	VoiceStore
	KeyStore
	VoiceLister
	control.AliasService
	// ConsumeToken marks an access token used; ETokenInvalid when another
	// use won or it expired.
	ConsumeToken(ctx context.Context, hash []byte, now int64) error
}

// Hooks let the server count what only the core sees; nil fields are off.
type Hooks struct {
	// Refused counts a refusal that neither the limiter nor the meter
	// counted itself (feature_disabled).
	Refused func(workspace string, err error)
	// Active follows the admissions holding a concurrency slot.
	Active interface {
		Inc()
		Dec()
	}
}

// Deps are the core's collaborators. Store and Meter are required.
type Deps struct {
	Store Store
	// Voices caches voice reads; nil: a cache that is never trusted (every
	// lookup reads the store) until SetLive.
	Voices *VoiceCache
	// Engines renders each voice with the engine it names; Engine is the
	// built-in one, whose readiness gates a realtime session.
	Engines *engine.Registry
	Engine  engine.Engine
	Limiter control.Limiter // nil: control.NewMemoryLimiter()
	Meter   control.Meter
	Hooks   Hooks
	Logger  *slog.Logger // nil: discarded
	// StoreTimeout bounds each limiter, meter and store call the core
	// makes; 0: DefaultStoreTimeout.
	StoreTimeout time.Duration
	// Keys sizes the API-key cache; Billing is the server's default
	// billing mode, which a workspace may override.
	Keys    KeyCacheConfig
	Billing string
	// MaxUploads caps the uploads being received or stored at once
	// (AdmitUpload; 0: 64). MediaDir holds the clone previews (Media);
	// JobQueued is called after an enroll or clone stored a job, so that
	// the job runner claims it without waiting for its poll; nil: none.
	MaxUploads int
	MediaDir   string
	JobQueued  func()
}

// DefaultStoreTimeout bounds one store round trip of the core.
const DefaultStoreTimeout = 5 * time.Second

// NewService builds the core; Close frees it.
func NewService(d Deps) (*Service, error) {
	s := &Service{store: d.Store, voices: d.Voices, engines: d.Engines, builtin: d.Engine,
		limiter: d.Limiter, meter: d.Meter, hooks: d.Hooks, log: d.Logger, timeout: d.StoreTimeout,
		billing: d.Billing, uploads: newUploads(d.MaxUploads), mediaDir: d.MediaDir, jobQueued: d.JobQueued}
	s.res, _ = d.Store.(Resources) // the server's store; fakes may have none
	if s.billing == "" {
		s.billing = control.BillingEnforce
	}
	var err error
	if s.keys, err = newKeyCache(d.Keys); err != nil {
		return nil, err
	}
	if s.voices == nil {
		s.voices = NewVoiceCache(30 * time.Second)
	}
	if s.engines == nil && s.builtin != nil {
		s.engines, _ = engine.NewRegistry(s.builtin) // one engine cannot collide with itself
	}
	if s.builtin == nil && s.engines != nil {
		s.builtin = s.engines.Builtin()
	}
	if s.limiter == nil {
		s.limiter = control.NewMemoryLimiter()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.timeout <= 0 {
		s.timeout = DefaultStoreTimeout
	}
	return s, nil
}

// Engines is the registry the core renders with (nil without an engine).
func (s *Service) Engines() *engine.Registry { return s.engines }

// Voices is the core's voice cache, for the server's change feed.
func (s *Service) Voices() *VoiceCache { return s.voices }

// call is the context of one store round trip.
// It is not the caller's context: a limit or a charge is settled even when
// the client has gone meanwhile (a refund must land).
func (s *Service) call(context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

// WorkspaceOf is the workspace as the meter needs it: p's limits, resolved
// already, as overrides.
func WorkspaceOf(p *control.Principal) *control.Workspace {
	l := p.Limits
	return &control.Workspace{ID: p.WorkspaceID, Plan: p.Plan, Billing: l.Billing, Allowance: &l.MonthlyChars}
}
