package control

import (
	"context"
	"time"
)

// The dashboard signs people in without passwords (docs/api.md#dashboard):
// an operator mints a single-use login link with the admin CLI; opening it
// starts a cookie session. Both secrets are stored only as their SHA-256.
const (
	LoginLinkPrefix        = "vsl_"
	DashboardSessionPrefix = "vss_"
	// DashboardSessionTTL is how long a dashboard session lasts.
	DashboardSessionTTL = 12 * time.Hour
	// LoginLinkTTL is a login link's default lifetime.
	LoginLinkTTL = 15 * time.Minute
)

// NewLoginLinkSecret returns a new login-link secret and its stored hash.
func NewLoginLinkSecret() (secret string, hash []byte) { return newSecret(LoginLinkPrefix) }

// NewDashboardSessionSecret returns a new session secret and its stored hash.
func NewDashboardSessionSecret() (secret string, hash []byte) {
	return newSecret(DashboardSessionPrefix)
}

// ValidLoginLinkFormat reports whether s has the shape of a login link secret.
func ValidLoginLinkFormat(s string) bool { return validSecret(s, LoginLinkPrefix) }

// ValidDashboardSessionFormat reports whether s has the shape of a session secret.
func ValidDashboardSessionFormat(s string) bool { return validSecret(s, DashboardSessionPrefix) }

// LoginLink is a single-use sign-in link for one workspace.
type LoginLink struct {
	Hash        []byte
	WorkspaceID string
	ExpiresAt   int64 // epoch ms
	CreatedAt   int64
}

// DashboardSession is a signed-in browser. It acts for its workspace with
// the scopes of a legacy key.
type DashboardSession struct {
	ID          string
	WorkspaceID string
	Hash        []byte
	ExpiresAt   int64 // epoch ms
	CreatedAt   int64
}

// DailyUsage is the characters billed to a workspace on one UTC day; refunds
// are subtracted from the day of their charge.
type DailyUsage struct {
	Date       string // "2006-01-02", UTC
	Characters int64
}

// Day returns the UTC calendar day of t as "2006-01-02".
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// DashboardService stores login links and dashboard sessions, and answers
// the dashboard's own questions about a workspace.
type DashboardService interface {
	// CreateLoginLink stores l. ENotFound for an unknown workspace.
	CreateLoginLink(ctx context.Context, l *LoginLink) error
	// RedeemLoginLink uses the link with hash at now and stores sess for the
	// link's workspace (filling its id, workspace and creation time),
	// atomically: of any number of concurrent calls exactly one succeeds.
	// EUnauthorized when the link is unknown, used or expired.
	RedeemLoginLink(ctx context.Context, hash []byte, now int64, sess *DashboardSession) error
	// GetDashboardSession returns the session with hash. EUnauthorized when
	// there is none or it expired before now.
	GetDashboardSession(ctx context.Context, hash []byte, now int64) (*DashboardSession, error)
	// DeleteDashboardSession ends the session with hash; ending an unknown
	// session is not an error.
	DeleteDashboardSession(ctx context.Context, hash []byte) error
	// ListAPIKeys returns the workspace's keys, newest first, revoked ones
	// included.
	ListAPIKeys(ctx context.Context, ws string) ([]*APIKey, error)
	// DailyUsage returns the days from..to (inclusive, "2006-01-02") on
	// which ws was billed, oldest first; days without usage are left out.
	DailyUsage(ctx context.Context, ws, from, to string) ([]DailyUsage, error)
}

// SetDefaults fills what a new session leaves empty.
func (s *DashboardSession) SetDefaults(now int64) {
	if s.ID == "" {
		s.ID = NewID()
	}
	if s.CreatedAt == 0 {
		s.CreatedAt = now
	}
	if s.ExpiresAt == 0 {
		s.ExpiresAt = now + DashboardSessionTTL.Milliseconds()
	}
}

// ErrLoginLinkInvalid is the answer to an unknown, used or expired link.
func ErrLoginLinkInvalid() error {
	return Errorf(EUnauthorized, "this sign-in link is invalid, used or expired")
}

// ErrSessionInvalid is the answer to an unknown or expired session.
func ErrSessionInvalid() error {
	return Errorf(EUnauthorized, "the dashboard session is invalid or expired")
}
