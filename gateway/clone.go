package gateway

import (
	"encoding/json"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// POST /voices/{id}/enroll: a draft or failed voice of the workspace moves
// to processing with a pending clone job; 202. Enrolling is free.
func (s *Server) enroll(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	if !control.ValidID(id) {
		s.writeError(ctx, errNotFound)
		return
	}
	f, err := s.receiveUpload(ctx, p)
	var clip *control.Clip
	if err == nil {
		clip, err = s.checkUpload(f)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	sctx, cancel := storeCtx()
	defer cancel()
	v, err := s.store.GetVoice(sctx, id)
	if err == nil && v.OrgID != p.WorkspaceID {
		err = errNotFound
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if clip.Language == "" {
		clip.Language = v.PrimaryLanguage
	}
	v = &control.Voice{ID: id, OrgID: p.WorkspaceID, ConsentAt: control.NowMS(), ConsentKeyID: p.KeyID}
	s.startEnrollment(ctx, v, false, clip, f)
}

// POST /voices/clone: create a voice and enroll it in one step; 202.
func (s *Server) clone(ctx *fasthttp.RequestCtx, p *control.Principal) {
	f, err := s.receiveUpload(ctx, p)
	var clip *control.Clip
	if err == nil {
		clip, err = s.checkUpload(f)
	}
	var in *voiceInput
	if err == nil {
		in, err = cloneInput(f)
	}
	var v *control.Voice
	if err == nil {
		v, err = s.newVoice(in, p)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if clip.Language == "" {
		clip.Language = v.PrimaryLanguage
	}
	s.startEnrollment(ctx, v, true, clip, f)
}

// cloneInput validates the voice fields of a clone form with the rules of
// POST /voices: name required, description, labels (JSON text), and the
// clip's language as the voice's primary language.
func cloneInput(f *uploadForm) (*voiceInput, error) {
	if f.name == "" {
		return nil, control.Errorf(control.EInvalidRequest, "name is required")
	}
	vb := voiceBody{Name: &f.name, Description: f.description}
	if f.language != "" {
		vb.PrimaryLanguage = &f.language
	}
	if f.labels != nil && *f.labels != "" {
		var ls []control.Label
		if err := json.Unmarshal([]byte(*f.labels), &ls); err != nil {
			return nil, control.Errorf(control.EInvalidRequest,
				`labels: a JSON array of {"key": ..., "value": ...}`)
		}
		vb.Labels = &ls
	}
	return vb.validate()
}

// clipsInMemory bounds the clips read back from their files for the store
// at once: 4 x 20 MiB, twice over with the driver's copy.
const clipsInMemory = 4

// startEnrollment reads the clip back from its file, stores the voice
// change, the job and the clip in one transaction, answers 202 and wakes
// the job runner.
//
// The store takes the clip as one value, and its driver copies it once
// more, so a clip costs about twice its size (up to 40 MiB) while it is
// stored: clipSlots lets a few uploads do that at once, however many are
// being received.
func (s *Server) startEnrollment(ctx *fasthttp.RequestCtx, v *control.Voice, create bool, clip *control.Clip, f *uploadForm) {
	wait := time.NewTimer(storeTimeout)
	select {
	case s.clipSlots <- struct{}{}:
		wait.Stop()
		defer func() { <-s.clipSlots }()
	case <-wait.C:
		s.writeError(ctx, errUploadBusy)
		return
	}
	sctx, cancel := storeCtx()
	defer cancel()
	var err error
	if clip.Data, err = f.clipData(); err != nil {
		s.writeError(ctx, err)
		return
	}
	job := &control.Job{}
	err = s.store.StartEnrollment(sctx, v, create, job, clip)
	s.core.Voices().Invalidate(v.ID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if s.jobQueued != nil {
		s.jobQueued()
	}
	s.writeData(ctx, fasthttp.StatusAccepted, &enrollData{voice: v, jobID: job.ID})
}
