package control

import (
	"bytes"
	"encoding/json"
	"sort"
)

// The rules both stores apply to a record around their SQL: defaults of a
// new record, what an update changes, how a job ends, which catalog voices
// a seed rewrites, how JSON columns are encoded. The stores hold only the
// statements, so that the two cannot drift apart.

// SetDefaults fills what a new workspace leaves empty: its id, the free
// plan and its timestamps.
func (w *Workspace) SetDefaults(now int64) {
	if w.ID == "" {
		w.ID = NewID()
	}
	if w.Plan == "" {
		w.Plan = "free"
	}
	if w.CreatedAt == 0 {
		w.CreatedAt = now
	}
	if w.UpdatedAt == 0 {
		w.UpdatedAt = w.CreatedAt
	}
}

// Apply sets the fields upd names. Override pointers are copied, so that w
// never shares memory with upd. Used is not a workspace field: the store
// writes it to the month's usage.
func (w *Workspace) Apply(upd WorkspaceUpdate) {
	if upd.Plan != nil {
		w.Plan = *upd.Plan
	}
	if upd.Billing != nil {
		w.Billing = *upd.Billing
	}
	if upd.Streaming != nil {
		w.Streaming = ptr(*upd.Streaming)
	}
	if upd.Allowance != nil {
		w.Allowance = ptr(*upd.Allowance)
	}
	if upd.Credits != nil {
		w.Credits = *upd.Credits
	}
	if upd.Concurrency != nil {
		w.Concurrency = ptr(*upd.Concurrency)
	}
	if upd.RPS != nil {
		w.RPS = ptr(*upd.RPS)
	}
	if upd.Sessions != nil {
		w.Sessions = ptr(*upd.Sessions)
	}
}

// SetDefaults fills what a new key leaves empty: its id and its creation
// time.
func (k *APIKey) SetDefaults(now int64) {
	if k.ID == "" {
		k.ID = NewID()
	}
	if k.CreatedAt == 0 {
		k.CreatedAt = now
	}
}

// SetDefaults fills what a new access token leaves empty: its id and its
// creation time.
func (t *AccessToken) SetDefaults(now int64) {
	if t.ID == "" {
		t.ID = NewID()
	}
	if t.CreatedAt == 0 {
		t.CreatedAt = now
	}
}

// NonNil returns s, or an empty list for nil: list columns are never NULL.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// SetDefaults fills what a new voice leaves empty: its id and timestamps.
func (v *Voice) SetDefaults(now int64) {
	if v.ID == "" {
		v.ID = NewID()
	}
	if v.CreatedAt == 0 {
		v.CreatedAt = now
	}
	if v.UpdatedAt == 0 {
		v.UpdatedAt = v.CreatedAt
	}
}

// Apply sets the fields upd names.
func (v *Voice) Apply(upd VoiceUpdate) {
	if upd.Name != nil {
		v.Name = *upd.Name
	}
	if upd.Description != nil {
		v.Description = *upd.Description
	}
	if upd.PrimaryLanguage != nil {
		v.PrimaryLanguage = *upd.PrimaryLanguage
	}
	if upd.Labels != nil {
		v.Labels = *upd.Labels
	}
	if upd.Settings != nil {
		v.Settings = *upd.Settings
	}
	if upd.Visibility != nil {
		v.Visibility = *upd.Visibility
	}
}

// VoiceJSON encodes the JSON columns of v: labels, never null, and
// settings, nil (NULL) when unset.
func VoiceJSON(v *Voice) (labels string, settings *string, err error) {
	l := v.Labels
	if l == nil {
		l = []Label{}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return "", nil, err
	}
	if v.Settings != nil {
		s, err := json.Marshal(v.Settings)
		if err != nil {
			return "", nil, err
		}
		settings = ptr(string(s))
	}
	return string(b), settings, nil
}

// SameCatalogVoice reports whether seeding b over a would change nothing, so
// that restarts do not churn updated_at.
func SameCatalogVoice(a, b *Voice) bool {
	la, sa, _ := VoiceJSON(a)
	lb, sb, _ := VoiceJSON(b)
	return a.Name == b.Name && a.Description == b.Description && a.Status == b.Status &&
		a.CloneMethod == b.CloneMethod && a.Visibility == b.Visibility &&
		a.PrimaryLanguage == b.PrimaryLanguage && la == lb && equalPtr(sa, sb) &&
		a.SampleAudioURL == b.SampleAudioURL && a.BaseVoiceID == b.BaseVoiceID &&
		bytes.Equal(a.Profile, b.Profile) && a.Engine == b.Engine
}

// CatalogPlan is what seeding the catalog writes: voices to insert, voices
// to rewrite (each a change), and voices to delete (each a change).
type CatalogPlan struct {
	Insert, Update, Delete []*Voice
}

// Changed returns the ids of the voices the plan rewrites or deletes: each
// is a change to record.
func (p CatalogPlan) Changed() []string {
	ids := make([]string, 0, len(p.Update)+len(p.Delete))
	for _, v := range p.Update {
		ids = append(ids, v.ID)
	}
	for _, v := range p.Delete {
		ids = append(ids, v.ID)
	}
	return ids
}

// Write runs the plan's inserts, then its rewrites, with the store's own
// statements; deletions and change records are the store's (one statement
// for many where it can).
func (p CatalogPlan) Write(insert, rewrite func(*Voice) error) error {
	for _, v := range p.Insert {
		if err := insert(v); err != nil {
			return err
		}
	}
	for _, v := range p.Update {
		if err := rewrite(v); err != nil {
			return err
		}
	}
	return nil
}

// PlanCatalog decides how the catalog workspace catalogWS, which holds
// existing, comes to hold exactly voices, matched by alias. It fills the
// org, id and timestamps of every voice: a voice that keeps its alias keeps
// its id and creation time, and its updated_at unless seeding changes it.
func PlanCatalog(catalogWS string, existing, voices []*Voice, now int64) CatalogPlan {
	byAlias := make(map[string]*Voice, len(existing))
	for _, v := range existing {
		byAlias[v.Alias] = v
	}
	var p CatalogPlan
	keep := make(map[string]bool, len(voices))
	for _, v := range voices {
		v.OrgID = catalogWS
		keep[v.Alias] = true
		old, ok := byAlias[v.Alias]
		if !ok {
			v.SetDefaults(now)
			p.Insert = append(p.Insert, v)
			continue
		}
		v.ID, v.CreatedAt = old.ID, old.CreatedAt
		if SameCatalogVoice(old, v) {
			v.UpdatedAt = old.UpdatedAt
			continue
		}
		v.UpdatedAt = now
		p.Update = append(p.Update, v)
	}
	for alias, old := range byAlias {
		if !keep[alias] {
			p.Delete = append(p.Delete, old)
		}
	}
	sort.Slice(p.Delete, func(i, j int) bool { return p.Delete[i].ID < p.Delete[j].ID })
	return p
}

// MakePending makes j the new pending job of voice v, keeping a chosen id
// and job type.
func (j *Job) MakePending(v *Voice, now int64) {
	if j.ID == "" {
		j.ID = NewID()
	}
	if j.JobType == "" {
		j.JobType = DefaultJobType
	}
	j.VoiceID, j.OrgID = v.ID, v.OrgID
	j.Status, j.Progress, j.Error, j.Attempts = JobPending, 0, nil, 0
	j.LeaseOwner, j.LeaseUntil = "", 0
	j.CreatedAt, j.UpdatedAt = now, now
}

// Finish moves j, running under owner, to the terminal status: with jerr
// nil it succeeded (progress 100), else it failed with jerr. It reports
// false when j already has that status, so that an at-least-once worker may
// repeat the call, and ENotFound when j is not running under owner.
func (j *Job) Finish(owner, status string, jerr *JobError, now int64) (bool, error) {
	if j.Status == status {
		return false, nil
	}
	if j.Status != JobRunning || j.LeaseOwner != owner {
		return false, Errorf(ENotFound, "job not running for this worker")
	}
	j.Status, j.Error, j.UpdatedAt = status, jerr, now
	if jerr == nil {
		j.Progress = 100
	}
	return true, nil
}

func ptr[T any](v T) *T { return &v }

func equalPtr[T comparable](a, b *T) bool {
	return a == b || a != nil && b != nil && *a == *b
}
