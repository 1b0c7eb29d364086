package gateway

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
}

func newTimedStore(s control.Store, h *prometheus.HistogramVec) *timedStore {
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
	start := time.Now()
	r0 := ts.s.CreateWorkspace(ctx, w)
	ts.done(mCreateWorkspace, start)
	return r0
}

func (ts *timedStore) GetWorkspace(ctx context.Context, id string) (*control.Workspace, error) {
	start := time.Now()
	r0, r1 := ts.s.GetWorkspace(ctx, id)
	ts.done(mGetWorkspace, start)
	return r0, r1
}

func (ts *timedStore) UpdateWorkspace(ctx context.Context, id string, upd control.WorkspaceUpdate) (*control.Workspace, error) {
	start := time.Now()
	r0, r1 := ts.s.UpdateWorkspace(ctx, id, upd)
	ts.done(mUpdateWorkspace, start)
	return r0, r1
}

func (ts *timedStore) CreateAPIKey(ctx context.Context, k *control.APIKey) error {
	start := time.Now()
	r0 := ts.s.CreateAPIKey(ctx, k)
	ts.done(mCreateAPIKey, start)
	return r0
}

func (ts *timedStore) GetAPIKeyByHash(ctx context.Context, hash []byte) (*control.APIKey, error) {
	start := time.Now()
	r0, r1 := ts.s.GetAPIKeyByHash(ctx, hash)
	ts.done(mGetAPIKeyByHash, start)
	return r0, r1
}

func (ts *timedStore) GetAPIKey(ctx context.Context, id string) (*control.APIKey, error) {
	start := time.Now()
	r0, r1 := ts.s.GetAPIKey(ctx, id)
	ts.done(mGetAPIKey, start)
	return r0, r1
}

func (ts *timedStore) RevokeAPIKey(ctx context.Context, id string, at int64) (*control.APIKey, error) {
	start := time.Now()
	r0, r1 := ts.s.RevokeAPIKey(ctx, id, at)
	ts.done(mRevokeAPIKey, start)
	return r0, r1
}

func (ts *timedStore) CreateToken(ctx context.Context, t *control.AccessToken) error {
	start := time.Now()
	r0 := ts.s.CreateToken(ctx, t)
	ts.done(mCreateToken, start)
	return r0
}

func (ts *timedStore) GetTokenByHash(ctx context.Context, hash []byte) (*control.AccessToken, error) {
	start := time.Now()
	r0, r1 := ts.s.GetTokenByHash(ctx, hash)
	ts.done(mGetTokenByHash, start)
	return r0, r1
}

func (ts *timedStore) ConsumeToken(ctx context.Context, hash []byte, now int64) error {
	start := time.Now()
	r0 := ts.s.ConsumeToken(ctx, hash, now)
	ts.done(mConsumeToken, start)
	return r0
}

func (ts *timedStore) CreateVoice(ctx context.Context, v *control.Voice) error {
	start := time.Now()
	r0 := ts.s.CreateVoice(ctx, v)
	ts.done(mCreateVoice, start)
	return r0
}

func (ts *timedStore) GetVoice(ctx context.Context, id string) (*control.Voice, error) {
	start := time.Now()
	r0, r1 := ts.s.GetVoice(ctx, id)
	ts.done(mGetVoice, start)
	return r0, r1
}

func (ts *timedStore) GetVoiceByAlias(ctx context.Context, alias string) (*control.Voice, error) {
	start := time.Now()
	r0, r1 := ts.s.GetVoiceByAlias(ctx, alias)
	ts.done(mGetVoiceByAlias, start)
	return r0, r1
}

func (ts *timedStore) ListVoices(ctx context.Context, f control.VoiceFilter) ([]*control.Voice, int, error) {
	start := time.Now()
	r0, r1, r2 := ts.s.ListVoices(ctx, f)
	ts.done(mListVoices, start)
	return r0, r1, r2
}

func (ts *timedStore) UpdateVoice(ctx context.Context, ws, id string, upd control.VoiceUpdate) (*control.Voice, error) {
	start := time.Now()
	r0, r1 := ts.s.UpdateVoice(ctx, ws, id, upd)
	ts.done(mUpdateVoice, start)
	return r0, r1
}

func (ts *timedStore) DeleteVoice(ctx context.Context, ws, id string) error {
	start := time.Now()
	r0 := ts.s.DeleteVoice(ctx, ws, id)
	ts.done(mDeleteVoice, start)
	return r0
}

func (ts *timedStore) SeedCatalog(ctx context.Context, catalogWS string, voices []*control.Voice) error {
	start := time.Now()
	r0 := ts.s.SeedCatalog(ctx, catalogWS, voices)
	ts.done(mSeedCatalog, start)
	return r0
}

func (ts *timedStore) StartEnrollment(ctx context.Context, v *control.Voice, create bool, job *control.Job, clip *control.Clip) error {
	start := time.Now()
	r0 := ts.s.StartEnrollment(ctx, v, create, job, clip)
	ts.done(mStartEnrollment, start)
	return r0
}

func (ts *timedStore) GetJob(ctx context.Context, id string) (*control.Job, error) {
	start := time.Now()
	r0, r1 := ts.s.GetJob(ctx, id)
	ts.done(mGetJob, start)
	return r0, r1
}

func (ts *timedStore) ClaimJob(ctx context.Context, owner string, lease time.Duration) (*control.Job, *control.Clip, error) {
	start := time.Now()
	r0, r1, r2 := ts.s.ClaimJob(ctx, owner, lease)
	ts.done(mClaimJob, start)
	return r0, r1, r2
}

func (ts *timedStore) ReportProgress(ctx context.Context, jobID, owner string, progress int, lease time.Duration) error {
	start := time.Now()
	r0 := ts.s.ReportProgress(ctx, jobID, owner, progress, lease)
	ts.done(mReportProgress, start)
	return r0
}

func (ts *timedStore) SucceedJob(ctx context.Context, jobID, owner string, profile []byte, sampleURL string) error {
	start := time.Now()
	r0 := ts.s.SucceedJob(ctx, jobID, owner, profile, sampleURL)
	ts.done(mSucceedJob, start)
	return r0
}

func (ts *timedStore) FailJob(ctx context.Context, jobID, owner string, jerr control.JobError) error {
	start := time.Now()
	r0 := ts.s.FailJob(ctx, jobID, owner, jerr)
	ts.done(mFailJob, start)
	return r0
}

func (ts *timedStore) ExpireJobs(ctx context.Context, cutoff int64) (int, error) {
	start := time.Now()
	r0, r1 := ts.s.ExpireJobs(ctx, cutoff)
	ts.done(mExpireJobs, start)
	return r0, r1
}

func (ts *timedStore) Charge(ctx context.Context, ws, month string, allowance, chars int64, enforce bool) (control.Charge, control.Balance, error) {
	start := time.Now()
	r0, r1, r2 := ts.s.Charge(ctx, ws, month, allowance, chars, enforce)
	ts.done(mCharge, start)
	return r0, r1, r2
}

func (ts *timedStore) Refund(ctx context.Context, c control.Charge) error {
	start := time.Now()
	r0 := ts.s.Refund(ctx, c)
	ts.done(mRefund, start)
	return r0
}

func (ts *timedStore) Balance(ctx context.Context, ws, month string, allowance int64) (control.Balance, error) {
	start := time.Now()
	r0, r1 := ts.s.Balance(ctx, ws, month, allowance)
	ts.done(mBalance, start)
	return r0, r1
}

func (ts *timedStore) BeginIdempotent(ctx context.Context, ws, key, fingerprint string, now int64) (*control.IdempotentResponse, error) {
	start := time.Now()
	r0, r1 := ts.s.BeginIdempotent(ctx, ws, key, fingerprint, now)
	ts.done(mBeginIdempotent, start)
	return r0, r1
}

func (ts *timedStore) FinishIdempotent(ctx context.Context, ws, key string, resp *control.IdempotentResponse) error {
	start := time.Now()
	r0 := ts.s.FinishIdempotent(ctx, ws, key, resp)
	ts.done(mFinishIdempotent, start)
	return r0
}

func (ts *timedStore) AbandonIdempotent(ctx context.Context, ws, key string) error {
	start := time.Now()
	r0 := ts.s.AbandonIdempotent(ctx, ws, key)
	ts.done(mAbandonIdempotent, start)
	return r0
}

func (ts *timedStore) CreateLoginLink(ctx context.Context, l *control.LoginLink) error {
	start := time.Now()
	r0 := ts.s.CreateLoginLink(ctx, l)
	ts.done(mCreateLoginLink, start)
	return r0
}

func (ts *timedStore) RedeemLoginLink(ctx context.Context, hash []byte, now int64, sess *control.DashboardSession) error {
	start := time.Now()
	r0 := ts.s.RedeemLoginLink(ctx, hash, now, sess)
	ts.done(mRedeemLoginLink, start)
	return r0
}

func (ts *timedStore) GetDashboardSession(ctx context.Context, hash []byte, now int64) (*control.DashboardSession, error) {
	start := time.Now()
	r0, r1 := ts.s.GetDashboardSession(ctx, hash, now)
	ts.done(mGetDashboardSession, start)
	return r0, r1
}

func (ts *timedStore) DeleteDashboardSession(ctx context.Context, hash []byte) error {
	start := time.Now()
	r0 := ts.s.DeleteDashboardSession(ctx, hash)
	ts.done(mDeleteDashboardSession, start)
	return r0
}

func (ts *timedStore) ListAPIKeys(ctx context.Context, ws string) ([]*control.APIKey, error) {
	start := time.Now()
	r0, r1 := ts.s.ListAPIKeys(ctx, ws)
	ts.done(mListAPIKeys, start)
	return r0, r1
}

func (ts *timedStore) DailyUsage(ctx context.Context, ws, from, to string) ([]control.DailyUsage, error) {
	start := time.Now()
	r0, r1 := ts.s.DailyUsage(ctx, ws, from, to)
	ts.done(mDailyUsage, start)
	return r0, r1
}
