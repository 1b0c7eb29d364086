package control

import (
	"context"
	"time"
)

// The service interfaces below are implemented by control/sqlite and
// control/postgres and exercised by one suite in control/storetest. Each
// method documents the codes of the *Error values it returns; any other error
// is an internal failure.

// WorkspaceService stores workspaces.
type WorkspaceService interface {
	// CreateWorkspace inserts w; w.ID and timestamps are set when empty.
	CreateWorkspace(ctx context.Context, w *Workspace) error
	// GetWorkspace returns ENotFound for an unknown id.
	GetWorkspace(ctx context.Context, id string) (*Workspace, error)
	// UpdateWorkspace applies upd (Used sets this month's usage) and
	// records a change. ENotFound.
	UpdateWorkspace(ctx context.Context, id string, upd WorkspaceUpdate) (*Workspace, error)
}

// KeyService stores API keys by the SHA-256 of their secret.
type KeyService interface {
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKeyByHash returns ENotFound when no key has that hash.
	GetAPIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error)
	// GetAPIKey returns a key by id (an access token's creating key).
	// ENotFound.
	GetAPIKey(ctx context.Context, id string) (*APIKey, error)
	// RevokeAPIKey sets RevokedAt (keeping an earlier one) and records a
	// change. ENotFound.
	RevokeAPIKey(ctx context.Context, id string, at int64) (*APIKey, error)
}

// TokenService stores access tokens.
type TokenService interface {
	CreateToken(ctx context.Context, t *AccessToken) error
	// GetTokenByHash returns ETokenInvalid when unknown.
	GetTokenByHash(ctx context.Context, hash []byte) (*AccessToken, error)
	// ConsumeToken marks the token used, atomically: of any number of
	// concurrent calls on any number of servers exactly one succeeds.
	// ETokenInvalid when unknown, already consumed or expired at now.
	ConsumeToken(ctx context.Context, hash []byte, now int64) error
}

// VoiceService stores voices.
type VoiceService interface {
	CreateVoice(ctx context.Context, v *Voice) error
	// GetVoice returns any voice by id, whatever its workspace; callers
	// check Usable. ENotFound.
	GetVoice(ctx context.Context, id string) (*Voice, error)
	// GetVoiceByAlias returns a public voice by alias. ENotFound.
	GetVoiceByAlias(ctx context.Context, alias string) (*Voice, error)
	// ListVoices returns the workspace's voices (newest first), then ready
	// public voices of other workspaces (by alias), paged; and the total.
	ListVoices(ctx context.Context, f VoiceFilter) ([]*Voice, int, error)
	// UpdateVoice changes a voice of workspace ws. ENotFound when the voice
	// is missing or not ws's own.
	UpdateVoice(ctx context.Context, ws, id string, upd VoiceUpdate) (*Voice, error)
	// DeleteVoice removes a voice of workspace ws and cancels its pending
	// or running jobs. ENotFound.
	DeleteVoice(ctx context.Context, ws, id string) error
	// SeedCatalog makes workspace catalogWS own exactly these public voices
	// (matched by alias): inserts new ones, updates changed ones.
	SeedCatalog(ctx context.Context, catalogWS string, voices []*Voice) error
}

// AliasService stores workspace voice aliases (docs/api.md, "Workspace
// voice aliases"): extra names a workspace gives to voices it can use, its
// own or public ones. An alias row belongs to the aliasing workspace and
// names a voice by id (a catalog voice belongs to the catalog workspace);
// aliases are unique per workspace, at most MaxAliasesPerVoice per voice and
// workspace, and are deleted with their voice (or their workspace). Every
// change of a workspace's aliases records an "alias" Change whose ID is the
// workspace's id (ChangeAlias); deleting a voice records one for every
// workspace that had aliased it.
type AliasService interface {
	// SetVoiceAliases replaces workspace ws's whole list of aliases for
	// voice voiceID with aliases (an empty list removes them all),
	// atomically, and returns the list as stored (ValidateAliases' order).
	// The list is checked with ValidateAliases: EInvalidRequest naming the
	// first bad alias. EAliasTaken (naming it) when another voice of ws
	// holds one of them; ENotFound when the voice is unknown or neither
	// ws's own nor public. A refused call changes nothing.
	SetVoiceAliases(ctx context.Context, ws, voiceID string, aliases []string) ([]string, error)
	// ListVoiceAliases returns ws's aliases of voice voiceID in the order
	// they were set; empty (not ENotFound) when there are none or the
	// voice is unknown.
	ListVoiceAliases(ctx context.Context, ws, voiceID string) ([]string, error)
	// ResolveVoiceAlias returns the id of the voice that workspace ws calls
	// alias. ENotFound when ws has no such alias (catalog aliases are
	// VoiceService.GetVoiceByAlias's).
	ResolveVoiceAlias(ctx context.Context, ws, alias string) (string, error)
	// WorkspaceAliases returns every alias of workspace ws, by voice id,
	// each list in the order it was set (for listing voices with their
	// workspace_aliases). An empty map when none.
	WorkspaceAliases(ctx context.Context, ws string) (map[string][]string, error)
}

// JobService stores clone jobs and their clips. Execution is at-least-once:
// a worker claims a job with a lease, renews it while working, and finishes
// it; a job whose lease lapsed is claimable again.
type JobService interface {
	// StartEnrollment atomically moves voice v (of workspace ws) from draft
	// or failed to processing, records consent, and stores job and clip.
	// When create is true the voice is inserted first (POST /voices/clone).
	// EVoiceBusy when the voice is processing or ready; ENotFound.
	StartEnrollment(ctx context.Context, v *Voice, create bool, job *Job, clip *Clip) error
	// GetJob returns ENotFound for an unknown id.
	GetJob(ctx context.Context, id string) (*Job, error)
	// ClaimJob takes the oldest pending job, or a running one whose lease
	// lapsed, for owner until now+lease, and returns it with its clip.
	// ENotFound when there is none.
	ClaimJob(ctx context.Context, owner string, lease time.Duration) (*Job, *Clip, error)
	// ReportProgress renews the lease and sets progress. ENotFound when the
	// job is no longer owned by owner or is terminal.
	ReportProgress(ctx context.Context, jobID, owner string, progress int, lease time.Duration) error
	// SucceedJob ends the job, makes the voice ready with profile (and the
	// sample URL when non-empty), and deletes the clip. Calling it again for
	// a succeeded job is a no-op. ENotFound when owned by another.
	SucceedJob(ctx context.Context, jobID, owner string, profile []byte, sampleURL string) error
	// FailJob ends the job with jerr, makes the voice failed, deletes the clip.
	FailJob(ctx context.Context, jobID, owner string, jerr JobError) error
	// ExpireJobs makes jobs pending since before cutoff expired (their voices
	// failed) and returns how many.
	ExpireJobs(ctx context.Context, cutoff int64) (int, error)
}

// BillingService keeps the monthly usage and the prepaid credits. Changes are
// transactional: concurrent charges never lose an update.
type BillingService interface {
	// Charge takes chars characters for month from the allowance, then from
	// credits. With enforce, a charge that is not covered in full is
	// refused whole (EQuotaExhausted when no credits are set,
	// EInsufficientCredits otherwise; Limit and Used filled) and nothing is
	// taken; without enforce it always succeeds. Returns the balance after.
	// What it takes is also added to the characters of the current UTC day
	// (Charge.Day), in the same transaction.
	Charge(ctx context.Context, ws, month string, allowance, chars int64, enforce bool) (Charge, Balance, error)
	// Refund gives back exactly what c took, from its month and its day.
	Refund(ctx context.Context, c Charge) error
	// Balance reports the month's state.
	Balance(ctx context.Context, ws, month string, allowance int64) (Balance, error)
}

// IdempotentResponse is a stored answer replayed for a retried request.
type IdempotentResponse struct {
	Status  int
	Headers map[string]string
	Body    []byte
}

// IdempotencyService remembers requests made with an Idempotency-Key for 24
// hours per workspace.
type IdempotencyService interface {
	// BeginIdempotent claims key for a request whose method, path and body
	// hash to fingerprint. It returns (nil, nil) when the caller should run
	// the request; the stored response when it already ran; or
	// EIdempotencyInProgress (still running) / EIdempotencyKeyReused
	// (different request).
	BeginIdempotent(ctx context.Context, ws, key, fingerprint string, now int64) (*IdempotentResponse, error)
	// FinishIdempotent stores the response of a claimed key.
	FinishIdempotent(ctx context.Context, ws, key string, resp *IdempotentResponse) error
	// AbandonIdempotent frees a claimed key whose request failed in a way
	// worth retrying (refused, or a server error).
	AbandonIdempotent(ctx context.Context, ws, key string) error
}

// Change is one event that invalidates cached auth state.
type Change struct {
	Seq  int64
	Kind string // "key", "workspace", "token", "voice", "alias" (ID: the workspace)
	ID   string
}

// ChangeFeed tells a server about changes made by any process on the store.
type ChangeFeed interface {
	// WatchChanges calls fn for every change after the call started, until
	// ctx ends; it delivers within a second. It returns ctx.Err().
	WatchChanges(ctx context.Context, fn func(Change)) error
}

// Store is everything a server needs from its storage.
type Store interface {
	WorkspaceService
	KeyService
	TokenService
	VoiceService
	AliasService
	JobService
	BillingService
	IdempotencyService
	DashboardService
	LeaseService
	ChangeFeed
	// Ping checks that the store answers (GET /readyz).
	Ping(ctx context.Context) error
	Close() error
}

// Slot kinds counted per workspace.
const (
	SlotStream  = "stream"  // concurrent synthesis streams
	SlotSession = "session" // open realtime sessions
)

// RateDecision is the answer of a request-rate check.
type RateDecision struct {
	Allowed    bool
	Limit      int     // requests per second (0 = none)
	Remaining  int     // requests left in the current window
	ResetAfter float64 // seconds until one more request is admitted
}

// Lease is a held concurrency slot; Release is idempotent.
type Lease interface {
	Release()
}

// Limiter counts requests per second and concurrency slots per workspace
// across all keys (and, with a shared store, all servers).
type Limiter interface {
	// AllowRequest takes one request from the workspace's per-second budget
	// (rps <= 0: no limit). A refusal returns the decision (Allowed false,
	// for the RateLimit header) AND an ERateLimited *Error whose RetryAfter
	// is at least 1, so callers need only check the error.
	AllowRequest(ctx context.Context, ws string, rps int) (RateDecision, error)
	// Acquire takes one slot of kind; free is the number of slots left
	// after this one. EConcurrencyLimited (SlotStream) or ETooManySessions
	// (SlotSession), with RetryAfter, when all limit slots are held.
	Acquire(ctx context.Context, ws, kind string, limit int) (lease Lease, free int, err error)
}

// Meter bills synthesized characters according to a workspace's billing mode
// (off, meter, enforce). Every transport charges through it before synthesis
// and refunds when the synthesis produced nothing.
type Meter interface {
	// Charge bills chars characters to ws. In enforce mode a charge that is
	// not covered is refused whole (EQuotaExhausted, EInsufficientCredits).
	// remaining is the balance after the charge for X-Billing-Remaining, or
	// -1 when billing is off (no header).
	Charge(ctx context.Context, ws *Workspace, chars int64) (c Charge, remaining int64, err error)
	// Refund gives back a charge whose synthesis produced no audio.
	Refund(ctx context.Context, c Charge) error
	// Remaining reports the balance, or -1 when billing is off for ws.
	Remaining(ctx context.Context, ws *Workspace) (int64, error)
	// Check is Remaining that, in enforce mode, refuses a zero balance with
	// the error a 1-character charge would get; it never charges.
	Check(ctx context.Context, ws *Workspace) (int64, error)
}
