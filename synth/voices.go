package synth

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"voicesvc/control"
	"voicesvc/langtag"
)

// The voices resource (docs/api.md#voices) as the core serves it to every
// protocol: listing, reading, creating, editing and deleting a workspace's
// voices, and its clone jobs. The protocol decodes and encodes; the rules
// (fields, access, the remix's base voice, languages an engine speaks) are
// here.

// Resources is what the resource operations read and write in the store
// beyond what a synthesis needs (Store). The server's store has all of it;
// a Service without it (the core's unit tests) answers them as internal
// errors.
type Resources interface {
	control.VoiceService
	control.KeyService
	control.TokenService
	control.JobService
	control.DashboardService
	control.WorkspaceService
	Balance(ctx context.Context, ws, month string, allowance int64) (control.Balance, error)
}

// resourceTimeout bounds one store call of a resource operation.
const resourceTimeout = 10 * time.Second

// resources is the store of the resource operations, and the context of
// one of its calls.
func (s *Service) resources() (Resources, context.Context, context.CancelFunc, error) {
	if s.res == nil {
		return nil, nil, nil, control.Errorf(control.EInternal, "the core has no resource store")
	}
	c, cancel := context.WithTimeout(context.Background(), resourceTimeout)
	return s.res, c, cancel, nil
}

// VoiceQuery is a listing's filter as a protocol read it; nil is absent.
type VoiceQuery struct {
	Page, PageSize, Visibility, Status, Language *string
}

// VoicePage is one page of a workspace's voices, with the workspace's
// aliases of each (by voice id).
type VoicePage struct {
	Voices         []*control.Voice
	Aliases        map[string][]string
	Page, PageSize int
	Total          int
}

const defaultPageSize, maxPageSize = 50, 100

// ListVoices lists the workspace's voices, then ready public catalog voices.
func (s *Service) ListVoices(ctx context.Context, p *control.Principal, q VoiceQuery) (*VoicePage, error) {
	f, err := voiceFilter(q)
	if err != nil {
		return nil, err
	}
	f.WorkspaceID = p.WorkspaceID
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	out := &VoicePage{Page: f.Page, PageSize: f.PageSize}
	if out.Voices, out.Total, err = st.ListVoices(c, f); err != nil {
		return nil, err
	}
	if out.Aliases, err = s.store.WorkspaceAliases(c, p.WorkspaceID); err != nil {
		return nil, err
	}
	return out, nil
}

func voiceFilter(q VoiceQuery) (control.VoiceFilter, error) {
	f := control.VoiceFilter{Page: 1, PageSize: defaultPageSize}
	num := func(name string, v *string, dst *int, lo, hi int) error {
		if v == nil {
			return nil
		}
		n, err := strconv.Atoi(*v)
		if err != nil || n < lo || n > hi {
			return control.Errorf(control.EInvalidPage, "%s: an integer from %d to %d", name, lo, hi)
		}
		*dst = n
		return nil
	}
	if err := num("page", q.Page, &f.Page, 1, 1<<31-1); err != nil {
		return f, err
	}
	if err := num("page_size", q.PageSize, &f.PageSize, 1, maxPageSize); err != nil {
		return f, err
	}
	if q.Visibility != nil {
		switch f.Visibility = *q.Visibility; f.Visibility {
		case "private", "org", "public":
		default:
			return f, control.Errorf(control.EInvalidRequest, "visibility: private, org or public")
		}
	}
	if q.Status != nil {
		switch f.Status = *q.Status; f.Status {
		case control.VoiceDraft, control.VoiceProcessing, control.VoiceReady, control.VoiceFailed:
		default:
			return f, control.Errorf(control.EInvalidRequest, "status: draft, processing, ready or failed")
		}
	}
	if q.Language != nil {
		tag, ok := langtag.Canonical(*q.Language)
		if !ok {
			return f, control.Errorf(control.EInvalidLanguage, "language: not a BCP-47 language tag")
		}
		f.Language = tag
	}
	return f, nil
}

// GetVoice is a voice p's workspace may use (its own or public), with the
// workspace's aliases of it.
func (s *Service) GetVoice(ctx context.Context, p *control.Principal, id string) (*control.Voice, []string, error) {
	v, err := s.UsableVoice(p, id)
	return s.withAliases(ctx, p, v, err)
}

// withAliases is v (unless err) with p's workspace's aliases of it.
func (s *Service) withAliases(ctx context.Context, p *control.Principal, v *control.Voice, err error) (*control.Voice, []string, error) {
	if err != nil {
		return nil, nil, err
	}
	aliases, err := s.Aliases(ctx, p, v.ID)
	if err != nil {
		return nil, nil, err
	}
	return v, aliases, nil
}

// CreateVoice stores a draft voice, or with a base voice a ready remix.
func (s *Service) CreateVoice(ctx context.Context, p *control.Principal, f *VoiceFields) (*control.Voice, error) {
	in, err := VoiceCreate(f)
	if err != nil {
		return nil, err
	}
	v, err := s.newVoice(in, p)
	if err != nil {
		return nil, err
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, err
	}
	defer cancel()
	if err := st.CreateVoice(c, v); err != nil {
		return nil, err
	}
	return v, nil
}

// newVoice builds the voice a validated create describes. A remix takes
// the base voice's engine profile, and its language and settings unless
// the request gives its own.
func (s *Service) newVoice(in *VoiceChange, p *control.Principal) (*control.Voice, error) {
	now := control.NowMS()
	v := &control.Voice{
		ID: control.NewID(), OrgID: p.WorkspaceID, Name: *in.Name,
		Status: control.VoiceDraft, CloneMethod: "instant", Visibility: "private",
		PrimaryLanguage: "en", Labels: []control.Label{},
		ConsentAt: now, ConsentKeyID: p.KeyID, CreatedAt: now, UpdatedAt: now,
	}
	if in.BaseVoiceID != "" {
		base, err := s.UsableVoice(p, in.BaseVoiceID)
		if control.IsCode(err, control.ENotFound) {
			return nil, control.Errorf(control.EInvalidVoiceID, "base_voice_id: no such voice")
		}
		if err != nil {
			return nil, err
		}
		if base.Status != control.VoiceReady {
			return nil, control.Errorf(control.EVoiceNotReady, "base_voice_id: the base voice is not ready")
		}
		v.Status, v.CloneMethod, v.BaseVoiceID = control.VoiceReady, "remix", base.ID
		v.Profile, v.Engine = append([]byte(nil), base.Profile...), base.Engine
		v.PrimaryLanguage, v.Settings = base.PrimaryLanguage, base.Settings
	}
	if in.PrimaryLanguage != nil {
		if err := s.CheckLanguage(*in.PrimaryLanguage); err != nil {
			return nil, err
		}
	}
	v.Apply(in.VoiceUpdate)
	return v, nil
}

// UpdateVoice edits a voice of p's workspace (public and other
// workspaces' voices are 404) and returns it with the workspace's aliases.
func (s *Service) UpdateVoice(ctx context.Context, p *control.Principal, id string, f *VoiceFields) (*control.Voice, []string, error) {
	if !control.ValidID(id) {
		return nil, nil, errNotFound
	}
	in, err := VoiceUpdate(f)
	if err == nil && in.PrimaryLanguage != nil {
		err = s.CheckLanguage(*in.PrimaryLanguage)
	}
	if err != nil {
		return nil, nil, err
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, nil, err
	}
	defer cancel()
	v, err := st.UpdateVoice(c, p.WorkspaceID, id, in.VoiceUpdate)
	s.voices.Invalidate(id)
	return s.withAliases(ctx, p, v, err)
}

// DeleteVoice deletes a voice of p's workspace; the store also cancels its
// pending job, and its preview files go at once (RemoveMedia).
func (s *Service) DeleteVoice(ctx context.Context, p *control.Principal, id string) error {
	if !control.ValidID(id) {
		return errNotFound
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return err
	}
	defer cancel()
	err = st.DeleteVoice(c, p.WorkspaceID, id)
	s.voices.Invalidate(id)
	if err != nil {
		return err
	}
	s.RemoveMedia(id)
	return nil
}

// Job is a clone job of p's workspace; another workspace's job is 404 like
// an unknown one.
func (s *Service) Job(ctx context.Context, p *control.Principal, id string) (*control.Job, error) {
	return owned(s, p, id, Resources.GetJob, func(j *control.Job) string { return j.OrgID })
}

// owned reads a record of p's workspace by id with get; another
// workspace's (ws names a record's) is 404 like an unknown one.
func owned[T any](s *Service, p *control.Principal, id string,
	get func(Resources, context.Context, string) (T, error), ws func(T) string) (T, error) {
	var none T
	if !control.ValidID(id) {
		return none, errNotFound
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return none, err
	}
	defer cancel()
	r, err := get(st, c, id)
	if err == nil && ws(r) != p.WorkspaceID {
		err = errNotFound
	}
	if err != nil {
		return none, err
	}
	return r, nil
}

var errNotFound = control.Errorf(control.ENotFound, "not found")

// CheckLanguage refuses a tag no engine speaks, by the rule every
// protocol shares (langtag.Match). Without an engine (not wired yet) only
// the shape was checked.
func (s *Service) CheckLanguage(tag string) error {
	if s.engines == nil {
		return nil
	}
	if _, ok := langtag.Match(tag, s.engines.Languages()); ok {
		return nil
	}
	return control.Errorf(control.EInvalidLanguage, "language %q is not supported", tag)
}

// Media previews: the job runner writes them into the media directory
// (Deps.MediaDir) as "<voice id>-<run id>.wav".

const mediaIDLen = 24

// ValidMediaName: "<voice id>-<run id>.wav", lower-case hex ids; only
// such flat names are served, so no path can leave the directory.
func ValidMediaName(name string) bool {
	const idLen = mediaIDLen
	if len(name) != 2*idLen+1+4 || name[idLen] != '-' || name[2*idLen+1:] != ".wav" {
		return false
	}
	return control.ValidID(name[:idLen]) && control.ValidID(name[idLen+1:2*idLen+1])
}

// Media opens a preview while its voice exists: deleting the voice
// removes its files (RemoveMedia), but a clone job still running may write
// one after the delete, and another server may hold its own copy; the
// voice lookup (cached, invalidated by the delete and the change feed)
// answers 404 for all of them. The caller closes the file.
func (s *Service) Media(name string) (*os.File, int64, error) {
	if s.mediaDir == "" || !ValidMediaName(name) {
		return nil, 0, errNotFound
	}
	f, err := os.Open(filepath.Join(s.mediaDir, name))
	if err != nil {
		return nil, 0, errNotFound
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, errNotFound
	}
	// Looked up after the file is found, so that guessed names cost no
	// store query.
	if _, err := s.voices.Get(s.store, name[:mediaIDLen]); err != nil {
		f.Close()
		if control.IsCode(err, control.ENotFound) {
			err = errNotFound
		}
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// RemoveMedia deletes every file of voice id in the media directory (its
// previews, and a temporary file a running job may be writing). The voice
// is already gone from the store, so a file that cannot be removed is no
// longer served anyway; it is logged.
func (s *Service) RemoveMedia(id string) {
	if s.mediaDir == "" || !control.ValidID(id) {
		return
	}
	files, _ := filepath.Glob(filepath.Join(s.mediaDir, id+"-*")) // ids are hex: no glob syntax
	for _, f := range files {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			s.log.Warn("voice deleted but its media file stays", "file", filepath.Base(f), "err", err)
		}
	}
}
