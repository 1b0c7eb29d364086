package native

import (
	"encoding/json"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/web"
)

// Enroll and clone (docs/api.md#uploads): multipart uploads, free,
// answered 202. The form is received by receiveUpload (upload.go); the
// rules of the clip and the voice are the core's (synth/enroll.go).

func (n *Protocol) registerClone(h web.Host) {
	for _, path := range []string{"/voices/{id}/enroll", "/voices/clone"} {
		handler := n.enroll
		if path == "/voices/clone" {
			handler = n.clone
		}
		h.Handle(web.Route{Method: "POST", Path: path, Scope: control.ScopeClone, Idempotent: true,
			Upload: true, Fingerprint: n.uploadFingerprint}, handler)
	}
}

// clip receives the upload and checks its clip with the core.
func (n *Protocol) clip(ctx *fasthttp.RequestCtx, p *control.Principal) (*uploadForm, *control.Clip, error) {
	f, err := n.receiveUpload(ctx, p)
	if err != nil {
		return nil, nil, err
	}
	clip, err := n.h.Core().CheckClip(&synth.ClipFields{Consent: f.consent, HasFile: f.hasFile, Size: f.clipSize,
		TooLarge: f.fileTooLarge, Head: f.clipHead(), Filename: string(f.filename), RefText: f.refText,
		RefTextTooLong: f.refTextTooLong, Language: f.language})
	return f, clip, err
}

// POST /voices/{id}/enroll: a draft or failed voice of the workspace moves
// to processing with a pending clone job.
func (n *Protocol) enroll(ctx *fasthttp.RequestCtx, p *control.Principal) {
	if !control.ValidID(pathID(ctx)) { // before the body is read
		n.h.WriteError(ctx, errNotFound)
		return
	}
	f, clip, err := n.clip(ctx, p)
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	v, job, err := n.h.Core().Enroll(ctx, p, pathID(ctx), clip, f.clipData)
	n.answer(ctx, err, fasthttp.StatusAccepted, enrollData(v, job))
}

// POST /voices/clone: create a voice and enroll it in one step. Its voice
// fields are those of POST /voices, labels as JSON text, and the clip's
// language as the voice's primary language.
func (n *Protocol) clone(ctx *fasthttp.RequestCtx, p *control.Principal) {
	f, clip, err := n.clip(ctx, p)
	var fields *synth.VoiceFields
	if err == nil {
		fields, err = cloneFields(f)
	}
	var v *control.Voice
	var job string
	if err == nil {
		v, job, err = n.h.Core().Clone(ctx, p, fields, clip, f.clipData)
	}
	n.answer(ctx, err, fasthttp.StatusAccepted, enrollData(v, job))
}

// cloneFields decodes the voice fields of a clone form; a missing name is
// the core's to refuse, before the labels are read.
func cloneFields(f *uploadForm) (*synth.VoiceFields, error) {
	if f.name == "" {
		return &synth.VoiceFields{}, nil
	}
	vf := &synth.VoiceFields{Name: &f.name, Description: f.description}
	if f.language != "" {
		vf.Language = &f.language
	}
	if f.labels != nil && *f.labels != "" {
		var ls []control.Label
		if err := json.Unmarshal([]byte(*f.labels), &ls); err != nil {
			return nil, control.Errorf(control.EInvalidRequest,
				`labels: a JSON array of {"key": ..., "value": ...}`)
		}
		vf.Labels = &ls
	}
	return vf, nil
}

// enrollData writes the 202 data: {"voice": ..., "job_id": ...}.
func enrollData(v *control.Voice, jobID string) func([]byte) []byte {
	return func(b []byte) []byte {
		b = append(b, `{"voice":`...)
		b = appendVoice(b, v, nil)
		b = append(b, `,"job_id":`...)
		b = appendString(b, jobID)
		return append(b, '}')
	}
}
