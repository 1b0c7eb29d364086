// Package control holds the domain of voicesvc: workspaces, plans, API keys,
// access tokens, voices, clone jobs, usage; the service interfaces the
// storage packages implement; and the one error type of the service.
//
// Storage lives in packages named after their dependency (control/sqlite,
// control/postgres). The gateway and sessions depend on these interfaces only.
package control

import (
	"crypto/rand"
	"encoding/hex"
	"time"
)

// Plan is a row of the plan table (docs/api.md#plans).
type Plan struct {
	Name         string
	Concurrency  int   // concurrent-stream slots
	RPS          int   // requests per second; 0 = no limit
	MonthlyChars int64 // monthly character allowance
	Streaming    bool  // SSE, WebSocket and streamed compat allowed
	Sessions     int   // open realtime sessions
}

// Plans is the one plan table; workspaces override single fields.
var Plans = map[string]Plan{
	"free":       {Name: "free", Concurrency: 2, RPS: 2, MonthlyChars: 10_000, Streaming: true, Sessions: 4},
	"starter":    {Name: "starter", Concurrency: 5, RPS: 0, MonthlyChars: 100_000, Streaming: true, Sessions: 4},
	"pro":        {Name: "pro", Concurrency: 10, RPS: 0, MonthlyChars: 1_000_000, Streaming: true, Sessions: 4},
	"enterprise": {Name: "enterprise", Concurrency: 50, RPS: 0, MonthlyChars: 10_000_000, Streaming: true, Sessions: 4},
}

// Billing modes.
const (
	BillingOff     = "off"     // no metering headers, no denials
	BillingMeter   = "meter"   // count and report, never deny
	BillingEnforce = "enforce" // count and deny
)

// ValidBilling reports whether s names a billing mode.
func ValidBilling(s string) bool {
	return s == BillingOff || s == BillingMeter || s == BillingEnforce
}

// Workspace owns keys, voices, jobs and usage. Nil override fields mean "the
// plan's value"; Billing "" means "the server's default mode".
type Workspace struct {
	ID        string
	Name      string
	Plan      string
	Billing   string
	Streaming *bool
	Allowance *int64 // monthly characters
	Credits   int64  // prepaid character balance remaining
	// Concurrency, RPS and Sessions override the plan's limits (RPS 0 = none).
	Concurrency *int
	RPS         *int
	Sessions    *int
	CreatedAt   int64
	UpdatedAt   int64
}

// Limits is a workspace's effective plan after overrides.
type Limits struct {
	Concurrency  int
	RPS          int
	Sessions     int
	MonthlyChars int64
	Streaming    bool
	Billing      string
}

// Limits resolves the workspace's overrides against its plan and the server's
// default billing mode.
func (w *Workspace) Limits(defaultBilling string) Limits {
	p, ok := Plans[w.Plan]
	if !ok {
		p = Plans["free"]
	}
	l := Limits{Concurrency: p.Concurrency, RPS: p.RPS, Sessions: p.Sessions,
		MonthlyChars: p.MonthlyChars, Streaming: p.Streaming, Billing: defaultBilling}
	if w.Concurrency != nil {
		l.Concurrency = *w.Concurrency
	}
	if w.RPS != nil {
		l.RPS = *w.RPS
	}
	if w.Sessions != nil {
		l.Sessions = *w.Sessions
	}
	if w.Allowance != nil {
		l.MonthlyChars = *w.Allowance
	}
	if w.Streaming != nil {
		l.Streaming = *w.Streaming
	}
	if w.Billing != "" {
		l.Billing = w.Billing
	}
	return l
}

// WorkspaceUpdate changes the non-nil fields of a workspace (admin CLI).
type WorkspaceUpdate struct {
	Plan        *string
	Billing     *string
	Streaming   *bool
	Allowance   *int64
	Credits     *int64
	Used        *int64 // this month's used characters
	Concurrency *int
	RPS         *int
	Sessions    *int
}

// Scopes (docs/api.md#api-keys).
const (
	ScopeVoicesRead  = "voices:read"
	ScopeVoicesWrite = "voices:write"
	ScopeClone       = "clone"
	ScopeTTS         = "tts"
)

// AllScopes is what legacy keys and keys created without --scopes get.
var AllScopes = []string{ScopeTTS, ScopeVoicesRead, ScopeVoicesWrite, ScopeClone}

// APIKey is a workspace key. Only the SHA-256 of the secret is stored.
type APIKey struct {
	ID          string
	WorkspaceID string
	Name        string // a label for people; "" when none
	Hash        []byte // sha256 of the full key
	Scopes      []string
	Legacy      bool
	ExpiresAt   int64 // epoch ms; 0 = never
	RevokedAt   int64 // epoch ms; 0 = not revoked
	CreatedAt   int64
}

// HasScope reports whether the key carries scope.
func (k *APIKey) HasScope(scope string) bool {
	for _, s := range k.Scopes {
		if s == scope {
			return true
		}
	}
	return false
}

// AccessToken is a short-lived single-use browser token (docs/api.md#access-tokens).
type AccessToken struct {
	ID          string
	Hash        []byte
	WorkspaceID string
	KeyID       string   // the creating key: revoking it makes the token unusable
	VoiceIDs    []string // empty = any voice the workspace can use
	ExpiresAt   int64
	ConsumedAt  int64 // 0 = still valid
	CreatedAt   int64
}

// Voice statuses.
const (
	VoiceDraft      = "draft"
	VoiceProcessing = "processing"
	VoiceReady      = "ready"
	VoiceFailed     = "failed"
)

// Label is one key/value label of a voice.
type Label struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// VoiceSettings are synthesis defaults stored on a voice; nil fields are unset.
type VoiceSettings struct {
	Stability       *float64       `json:"stability,omitempty"`
	Similarity      *float64       `json:"similarity,omitempty"`
	Style           *float64       `json:"style,omitempty"`
	Speed           *float64       `json:"speed,omitempty"`
	Pitch           *float64       `json:"pitch,omitempty"`
	Volume          *float64       `json:"volume,omitempty"`
	UseSpeakerBoost *bool          `json:"use_speaker_boost,omitempty"`
	Emotion         *string        `json:"emotion,omitempty"`
	EngineParams    map[string]any `json:"engine_params,omitempty"`
}

// Voice is a voice of a workspace or of the public catalog. Profile is the
// engine's opaque profile; only the engine that made it reads it.
type Voice struct {
	ID              string
	OrgID           string
	Name            string
	Description     string
	Status          string
	CloneMethod     string
	Visibility      string
	PrimaryLanguage string
	Labels          []Label
	Settings        *VoiceSettings
	SampleAudioURL  string
	BaseVoiceID     string
	Alias           string
	Profile         []byte
	// Engine names the engine that renders the voice: "" is the built-in
	// engine, anything else an upstream engine of the server's
	// configuration. A remix inherits its base voice's engine.
	Engine       string
	ConsentAt    int64 // when consent was attested
	ConsentKeyID string
	CreatedAt    int64
	UpdatedAt    int64
}

// Usable reports whether workspace ws may synthesize with or read v.
func (v *Voice) Usable(ws string) bool {
	return v.OrgID == ws || v.Visibility == "public"
}

// VoiceFilter selects a page of GET /voices.
type VoiceFilter struct {
	WorkspaceID string
	Page        int // 1-based
	PageSize    int
	Visibility  string
	Status      string
	Language    string
}

// VoiceUpdate changes the non-nil fields of a voice (PATCH /voices/{id}).
type VoiceUpdate struct {
	Name            *string
	Description     *string
	PrimaryLanguage *string
	Labels          *[]Label
	Settings        **VoiceSettings
	Visibility      *string
}

// Job statuses.
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
	JobExpired   = "expired"
)

// JobTerminal reports whether a job status is final.
func JobTerminal(status string) bool {
	switch status {
	case JobSucceeded, JobFailed, JobCancelled, JobExpired:
		return true
	}
	return false
}

// JobError is the error of a failed job.
type JobError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Job is a clone job (docs/api.md#job-object). Lease fields are internal.
type Job struct {
	ID         string
	VoiceID    string
	OrgID      string
	JobType    string
	Status     string
	Progress   int
	Error      *JobError
	Attempts   int
	LeaseOwner string
	LeaseUntil int64
	CreatedAt  int64
	UpdatedAt  int64
}

// Clip is the uploaded reference audio of a job, kept until the job ends.
type Clip struct {
	JobID    string
	Data     []byte
	Filename string
	Language string
	RefText  string
}

// Balance is a workspace's billing state for one month.
type Balance struct {
	Allowance int64 // monthly characters
	Used      int64 // used this month
	Credits   int64 // prepaid characters left
}

// Remaining is what X-Billing-Remaining reports: allowance left plus credits.
func (b Balance) Remaining() int64 {
	left := b.Allowance - b.Used
	if left < 0 {
		left = 0
	}
	return left + b.Credits
}

// Charge is what one metered request took, so that it can be given back
// exactly when the request fails before producing audio.
type Charge struct {
	WorkspaceID   string
	Month         string
	Day           string // UTC day of the charge ("2006-01-02"): refunds subtract from it
	FromAllowance int64
	FromCredits   int64
}

// Month returns the UTC calendar month of t as "2006-01".
func Month(t time.Time) string { return t.UTC().Format("2006-01") }

// NowMS returns the current time in epoch milliseconds.
func NowMS() int64 { return time.Now().UnixMilli() }

// NewID returns a 24-character lower-case hex id from 12 random bytes.
func NewID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b[:])
}

// ValidID reports whether s is a 24-character lower-case hex id.
func ValidID(s string) bool {
	if len(s) != 24 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
