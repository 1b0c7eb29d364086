package synth

import (
	"context"
	"crypto/sha256"

	"voicesvc/control"
)

// The dashboard's sign-in (docs/api.md#dashboard-sessions): a single-use
// link (`voicesvc admin login-link`) becomes a session whose secret is
// stored only as its SHA-256, valid 12 hours.

// ErrLinkMalformed is a sign-in link that is not one (cut short, say):
// 401, before any store call.
var ErrLinkMalformed = control.Errorf(control.EUnauthorized, "this sign-in link is not valid")

// Login redeems a sign-in link: the new session and its secret, which
// nothing keeps. A used, expired or unknown link is 401 unauthorized.
func (s *Service) Login(ctx context.Context, link []byte) (string, *control.DashboardSession, error) {
	if !control.ValidLoginLinkFormat(string(link)) {
		return "", nil, ErrLinkMalformed
	}
	sum := sha256.Sum256(link)
	secret, hash := control.NewDashboardSessionSecret()
	sess := &control.DashboardSession{Hash: hash}
	st, c, cancel, err := s.resources()
	if err != nil {
		return "", nil, err
	}
	defer cancel()
	if err := st.RedeemLoginLink(c, sum[:], control.NowMS(), sess); err != nil {
		return "", nil, err
	}
	return secret, sess, nil
}

// Logout ends the session of secret; a secret that is not one ends nothing.
func (s *Service) Logout(ctx context.Context, secret []byte) error {
	if !control.ValidDashboardSessionFormat(string(secret)) {
		return nil
	}
	sum := sha256.Sum256(secret)
	st, c, cancel, err := s.resources()
	if err != nil {
		return err
	}
	defer cancel()
	return st.DeleteDashboardSession(c, sum[:])
}

// SessionWorkspace is the workspace of a dashboard session, and its limits
// at the server's billing mode.
func (s *Service) SessionWorkspace(ctx context.Context, sess *control.DashboardSession) (*control.Workspace, control.Limits, error) {
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, control.Limits{}, err
	}
	defer cancel()
	ws, err := st.GetWorkspace(c, sess.WorkspaceID)
	if err != nil {
		return nil, control.Limits{}, err
	}
	return ws, ws.Limits(s.billing), nil
}

// Session is the live dashboard session of secret (its cookie's); a
// malformed, unknown or expired one is a plain 401.
func (s *Service) Session(ctx context.Context, secret []byte) (*control.DashboardSession, error) {
	if !control.ValidDashboardSessionFormat(string(secret)) {
		return nil, errUnauthorized
	}
	sum := sha256.Sum256(secret)
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	sess, err := st.GetDashboardSession(c, sum[:], control.NowMS())
	if control.IsCode(err, control.EUnauthorized) {
		return nil, errUnauthorized
	}
	return sess, err
}

// SessionPrincipal is the principal of a dashboard session: its workspace,
// with the scopes of a legacy key (a workspace gone is 401).
func (s *Service) SessionPrincipal(ctx context.Context, sess *control.DashboardSession) (*control.Principal, error) {
	ws, l, err := s.SessionWorkspace(ctx, sess)
	if control.IsCode(err, control.ENotFound) {
		return nil, errUnauthorized
	}
	if err != nil {
		return nil, err
	}
	return &control.Principal{WorkspaceID: ws.ID, KeyID: control.DashboardKeyPrefix + sess.ID, Legacy: true, Plan: ws.Plan,
		ExpiresAt: sess.ExpiresAt, Limits: l, Session: true}, nil
}
