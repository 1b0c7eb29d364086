package telemetry

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"voicesvc/control"
)

// timedStore times every call of the store the server uses, for
// voicesvc_store_duration_seconds{method}: the keys and voices the caches
// miss, billing, idempotency, jobs. The change feed (one call that lasts
// the server's life), Ping and Close are passed through untimed. Each
// method's series is resolved once, at construction.
type timedStore struct {
	control.Store
	s   control.Store
	obs [storeMethods]prometheus.Observer
}

type storeMethod int

const (
	mCreateWorkspace storeMethod = iota
	mGetWorkspace
	mUpdateWorkspace
	mCreateAPIKey
	mGetAPIKeyByHash
	mGetAPIKey
	mRevokeAPIKey
	mCreateToken
	mGetTokenByHash
	mConsumeToken
	mCreateVoice
	mGetVoice
	mGetVoiceByAlias
	mListVoices
	mUpdateVoice
	mDeleteVoice
	mSeedCatalog
	mStartEnrollment
	mGetJob
	mClaimJob
	mReportProgress
	mSucceedJob
	mFailJob
	mExpireJobs
	mCharge
	mRefund
	mBalance
	mBeginIdempotent
	mFinishIdempotent
	mAbandonIdempotent
	mCreateLoginLink
	mRedeemLoginLink
	mGetDashboardSession
	mDeleteDashboardSession
	mListAPIKeys
	mDailyUsage
	mSetVoiceAliases
	mListVoiceAliases
	mResolveVoiceAlias
	mWorkspaceAliases
	mLeaseSlots
	mSettleBilling
	mRenewLeases
	mDropLeases
	mLeaseRequests
	storeMethods
)

var storeMethodNames = [storeMethods]string{
	"CreateWorkspace",
	"GetWorkspace",
	"UpdateWorkspace",
	"CreateAPIKey",
	"GetAPIKeyByHash",
	"GetAPIKey",
	"RevokeAPIKey",
	"CreateToken",
	"GetTokenByHash",
	"ConsumeToken",
	"CreateVoice",
	"GetVoice",
	"GetVoiceByAlias",
	"ListVoices",
	"UpdateVoice",
	"DeleteVoice",
	"SeedCatalog",
	"StartEnrollment",
	"GetJob",
	"ClaimJob",
	"ReportProgress",
	"SucceedJob",
	"FailJob",
	"ExpireJobs",
	"Charge",
	"Refund",
	"Balance",
	"BeginIdempotent",
	"FinishIdempotent",
	"AbandonIdempotent",
	"CreateLoginLink",
	"RedeemLoginLink",
	"GetDashboardSession",
	"DeleteDashboardSession",
	"ListAPIKeys",
	"DailyUsage",
	"SetVoiceAliases",
	"ListVoiceAliases",
	"ResolveVoiceAlias",
	"WorkspaceAliases",
	"LeaseSlots",
	"SettleBilling",
	"RenewLeases",
	"DropLeases",
	"LeaseRequests",
}

// NewTimedStore times every call of s in h (voicesvc_store_duration_seconds,
// Synth.Store).
func NewTimedStore(s control.Store, h *prometheus.HistogramVec) control.Store {
	t := &timedStore{Store: s, s: s}
	for i, n := range storeMethodNames {
		t.obs[i] = h.WithLabelValues(n)
	}
	return t
}

func (ts *timedStore) done(m storeMethod, start time.Time) {
	ts.obs[m].Observe(time.Since(start).Seconds())
}

func (ts *timedStore) CreateWorkspace(ctx context.Context, w *control.Workspace) error {
	defer ts.done(mCreateWorkspace, time.Now())
	return ts.s.CreateWorkspace(ctx, w)
}

func (ts *timedStore) GetWorkspace(ctx context.Context, id string) (*control.Workspace, error) {
	defer ts.done(mGetWorkspace, time.Now())
	return ts.s.GetWorkspace(ctx, id)
}

func (ts *timedStore) UpdateWorkspace(ctx context.Context, id string, upd control.WorkspaceUpdate) (*control.Workspace, error) {
	defer ts.done(mUpdateWorkspace, time.Now())
	return ts.s.UpdateWorkspace(ctx, id, upd)
}

func (ts *timedStore) CreateAPIKey(ctx context.Context, k *control.APIKey) error {
	defer ts.done(mCreateAPIKey, time.Now())
	return ts.s.CreateAPIKey(ctx, k)
}

func (ts *timedStore) GetAPIKeyByHash(ctx context.Context, hash []byte) (*control.APIKey, error) {
	defer ts.done(mGetAPIKeyByHash, time.Now())
	return ts.s.GetAPIKeyByHash(ctx, hash)
}

func (ts *timedStore) GetAPIKey(ctx context.Context, id string) (*control.APIKey, error) {
	defer ts.done(mGetAPIKey, time.Now())
	return ts.s.GetAPIKey(ctx, id)
}

func (ts *timedStore) RevokeAPIKey(ctx context.Context, id string, at int64) (*control.APIKey, error) {
	defer ts.done(mRevokeAPIKey, time.Now())
	return ts.s.RevokeAPIKey(ctx, id, at)
}

func (ts *timedStore) CreateToken(ctx context.Context, t *control.AccessToken) error {
	defer ts.done(mCreateToken, time.Now())
	return ts.s.CreateToken(ctx, t)
}

func (ts *timedStore) GetTokenByHash(ctx context.Context, hash []byte) (*control.AccessToken, error) {
	defer ts.done(mGetTokenByHash, time.Now())
	return ts.s.GetTokenByHash(ctx, hash)
}

func (ts *timedStore) ConsumeToken(ctx context.Context, hash []byte, now int64) error {
	defer ts.done(mConsumeToken, time.Now())
	return ts.s.ConsumeToken(ctx, hash, now)
}

func (ts *timedStore) CreateVoice(ctx context.Context, v *control.Voice) error {
	defer ts.done(mCreateVoice, time.Now())
	return ts.s.CreateVoice(ctx, v)
}

func (ts *timedStore) GetVoice(ctx context.Context, id string) (*control.Voice, error) {
	defer ts.done(mGetVoice, time.Now())
	return ts.s.GetVoice(ctx, id)
}

func (ts *timedStore) GetVoiceByAlias(ctx context.Context, alias string) (*control.Voice, error) {
	defer ts.done(mGetVoiceByAlias, time.Now())
	return ts.s.GetVoiceByAlias(ctx, alias)
}

func (ts *timedStore) ListVoices(ctx context.Context, f control.VoiceFilter) ([]*control.Voice, int, error) {
	defer ts.done(mListVoices, time.Now())
	return ts.s.ListVoices(ctx, f)
}

func (ts *timedStore) UpdateVoice(ctx context.Context, ws, id string, upd control.VoiceUpdate) (*control.Voice, error) {
	defer ts.done(mUpdateVoice, time.Now())
	return ts.s.UpdateVoice(ctx, ws, id, upd)
}

func (ts *timedStore) DeleteVoice(ctx context.Context, ws, id string) error {
	defer ts.done(mDeleteVoice, time.Now())
	return ts.s.DeleteVoice(ctx, ws, id)
}

func (ts *timedStore) SeedCatalog(ctx context.Context, catalogWS string, voices []*control.Voice) error {
	defer ts.done(mSeedCatalog, time.Now())
	return ts.s.SeedCatalog(ctx, catalogWS, voices)
}

func (ts *timedStore) StartEnrollment(ctx context.Context, v *control.Voice, create bool, job *control.Job, clip *control.Clip) error {
	defer ts.done(mStartEnrollment, time.Now())
	return ts.s.StartEnrollment(ctx, v, create, job, clip)
}

func (ts *timedStore) GetJob(ctx context.Context, id string) (*control.Job, error) {
	defer ts.done(mGetJob, time.Now())
	return ts.s.GetJob(ctx, id)
}

func (ts *timedStore) ClaimJob(ctx context.Context, owner string, lease time.Duration) (*control.Job, *control.Clip, error) {
	defer ts.done(mClaimJob, time.Now())
	return ts.s.ClaimJob(ctx, owner, lease)
}

func (ts *timedStore) ReportProgress(ctx context.Context, jobID, owner string, progress int, lease time.Duration) error {
	defer ts.done(mReportProgress, time.Now())
	return ts.s.ReportProgress(ctx, jobID, owner, progress, lease)
}

func (ts *timedStore) SucceedJob(ctx context.Context, jobID, owner string, profile []byte, sampleURL string) error {
	defer ts.done(mSucceedJob, time.Now())
	return ts.s.SucceedJob(ctx, jobID, owner, profile, sampleURL)
}

func (ts *timedStore) FailJob(ctx context.Context, jobID, owner string, jerr control.JobError) error {
	defer ts.done(mFailJob, time.Now())
	return ts.s.FailJob(ctx, jobID, owner, jerr)
}

func (ts *timedStore) ExpireJobs(ctx context.Context, cutoff int64) (int, error) {
	defer ts.done(mExpireJobs, time.Now())
	return ts.s.ExpireJobs(ctx, cutoff)
}

func (ts *timedStore) Charge(ctx context.Context, ws, month string, allowance, chars int64, enforce bool) (control.Charge, control.Balance, error) {
	defer ts.done(mCharge, time.Now())
	return ts.s.Charge(ctx, ws, month, allowance, chars, enforce)
}

func (ts *timedStore) Refund(ctx context.Context, c control.Charge) error {
	defer ts.done(mRefund, time.Now())
	return ts.s.Refund(ctx, c)
}

func (ts *timedStore) Balance(ctx context.Context, ws, month string, allowance int64) (control.Balance, error) {
	defer ts.done(mBalance, time.Now())
	return ts.s.Balance(ctx, ws, month, allowance)
}

func (ts *timedStore) BeginIdempotent(ctx context.Context, ws, key, fingerprint string, now int64) (*control.IdempotentResponse, error) {
	defer ts.done(mBeginIdempotent, time.Now())
	return ts.s.BeginIdempotent(ctx, ws, key, fingerprint, now)
}

func (ts *timedStore) FinishIdempotent(ctx context.Context, ws, key string, resp *control.IdempotentResponse) error {
	defer ts.done(mFinishIdempotent, time.Now())
	return ts.s.FinishIdempotent(ctx, ws, key, resp)
}

func (ts *timedStore) AbandonIdempotent(ctx context.Context, ws, key string) error {
	defer ts.done(mAbandonIdempotent, time.Now())
	return ts.s.AbandonIdempotent(ctx, ws, key)
}

func (ts *timedStore) CreateLoginLink(ctx context.Context, l *control.LoginLink) error {
	defer ts.done(mCreateLoginLink, time.Now())
	return ts.s.CreateLoginLink(ctx, l)
}

func (ts *timedStore) RedeemLoginLink(ctx context.Context, hash []byte, now int64, sess *control.DashboardSession) error {
	defer ts.done(mRedeemLoginLink, time.Now())
	return ts.s.RedeemLoginLink(ctx, hash, now, sess)
}

func (ts *timedStore) GetDashboardSession(ctx context.Context, hash []byte, now int64) (*control.DashboardSession, error) {
	defer ts.done(mGetDashboardSession, time.Now())
	return ts.s.GetDashboardSession(ctx, hash, now)
}

func (ts *timedStore) DeleteDashboardSession(ctx context.Context, hash []byte) error {
	defer ts.done(mDeleteDashboardSession, time.Now())
	return ts.s.DeleteDashboardSession(ctx, hash)
}

func (ts *timedStore) ListAPIKeys(ctx context.Context, ws string) ([]*control.APIKey, error) {
	defer ts.done(mListAPIKeys, time.Now())
	return ts.s.ListAPIKeys(ctx, ws)
}

func (ts *timedStore) DailyUsage(ctx context.Context, ws, from, to string) ([]control.DailyUsage, error) {
	defer ts.done(mDailyUsage, time.Now())
	return ts.s.DailyUsage(ctx, ws, from, to)
}

func (ts *timedStore) SetVoiceAliases(ctx context.Context, ws, voiceID string, aliases []string) ([]string, error) {
	defer ts.done(mSetVoiceAliases, time.Now())
	return ts.s.SetVoiceAliases(ctx, ws, voiceID, aliases)
}

func (ts *timedStore) ListVoiceAliases(ctx context.Context, ws, voiceID string) ([]string, error) {
	defer ts.done(mListVoiceAliases, time.Now())
	return ts.s.ListVoiceAliases(ctx, ws, voiceID)
}

func (ts *timedStore) ResolveVoiceAlias(ctx context.Context, ws, alias string) (string, error) {
	defer ts.done(mResolveVoiceAlias, time.Now())
	return ts.s.ResolveVoiceAlias(ctx, ws, alias)
}

func (ts *timedStore) WorkspaceAliases(ctx context.Context, ws string) (map[string][]string, error) {
	defer ts.done(mWorkspaceAliases, time.Now())
	return ts.s.WorkspaceAliases(ctx, ws)
}

func (ts *timedStore) LeaseSlots(ctx context.Context, holder, ws, kind string, limit, used, want int, ttl time.Duration) (int, int, error) {
	defer ts.done(mLeaseSlots, time.Now())
	return ts.s.LeaseSlots(ctx, holder, ws, kind, limit, used, want, ttl)
}

func (ts *timedStore) SettleBilling(ctx context.Context, holder string, s control.BillingSettle, ttl time.Duration) (control.BillingLease, error) {
	defer ts.done(mSettleBilling, time.Now())
	return ts.s.SettleBilling(ctx, holder, s, ttl)
}

func (ts *timedStore) RenewLeases(ctx context.Context, holder string, ttl time.Duration) error {
	defer ts.done(mRenewLeases, time.Now())
	return ts.s.RenewLeases(ctx, holder, ttl)
}

func (ts *timedStore) DropLeases(ctx context.Context, holder string) error {
	defer ts.done(mDropLeases, time.Now())
	return ts.s.DropLeases(ctx, holder)
}

func (ts *timedStore) LeaseRequests(ctx context.Context, ws string, rps, want int, back control.RequestsBack) (control.RequestsGrant, error) {
	defer ts.done(mLeaseRequests, time.Now())
	return ts.s.LeaseRequests(ctx, ws, rps, want, back)
}
