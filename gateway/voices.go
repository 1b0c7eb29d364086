package gateway

import (
	"context"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/langtag"
)

// The voices resource (docs/api.md#voices). Each handler: parse, call
// the store, write the result or the error.

// storeTimeout bounds one store call made by a handler.
const storeTimeout = 10 * time.Second

func storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), storeTimeout)
}

// pathID is the {id} of the route; it points into the request and must not
// be kept past the handler.
func pathID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("id").(string)
	return id
}

// GET /voices/{id}: the workspace's own voice or a public one.
func (s *Server) getVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	v, err := s.core.UsableVoice(p, pathID(ctx))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	aliases, err := s.core.Aliases(ctx, p, v.ID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, &voiceData{v: v, aliases: aliases})
}

// GET /voices: the workspace's voices, then ready public catalog voices.
func (s *Server) listVoices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	f, err := parseVoiceFilter(ctx.QueryArgs())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	f.WorkspaceID = p.WorkspaceID
	sctx, cancel := storeCtx()
	defer cancel()
	voices, total, err := s.store.ListVoices(sctx, f)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	aliases, err := s.store.WorkspaceAliases(sctx, p.WorkspaceID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, &voiceList{voices: voices, aliases: aliases,
		page: f.Page, pageSize: f.PageSize, total: total})
}

const defaultPageSize, maxPageSize = 50, 100

func parseVoiceFilter(args *fasthttp.Args) (control.VoiceFilter, error) {
	f := control.VoiceFilter{Page: 1, PageSize: defaultPageSize}
	num := func(name string, dst *int, lo, hi int) error {
		if !args.Has(name) {
			return nil
		}
		n, err := strconv.Atoi(string(args.Peek(name)))
		if err != nil || n < lo || n > hi {
			return control.Errorf(control.EInvalidPage, "%s: an integer from %d to %d", name, lo, hi)
		}
		*dst = n
		return nil
	}
	if err := num("page", &f.Page, 1, 1<<31-1); err != nil {
		return f, err
	}
	if err := num("page_size", &f.PageSize, 1, maxPageSize); err != nil {
		return f, err
	}
	if args.Has("visibility") {
		switch f.Visibility = string(args.Peek("visibility")); f.Visibility {
		case "private", "org", "public":
		default:
			return f, control.Errorf(control.EInvalidRequest, "visibility: private, org or public")
		}
	}
	if args.Has("status") {
		switch f.Status = string(args.Peek("status")); f.Status {
		case control.VoiceDraft, control.VoiceProcessing, control.VoiceReady, control.VoiceFailed:
		default:
			return f, control.Errorf(control.EInvalidRequest, "status: draft, processing, ready or failed")
		}
	}
	if args.Has("language") {
		tag, ok := langtag.Canonical(string(args.Peek("language")))
		if !ok {
			return f, control.Errorf(control.EInvalidLanguage, "language: not a BCP-47 language tag")
		}
		f.Language = tag
	}
	return f, nil
}

// POST /voices: a draft voice, or with base_voice_id a ready remix.
func (s *Server) createVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, err := parseVoiceCreate(ctx.Request.Body(), s.cfg.MaxJSONBody)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	v, err := s.newVoice(in, p)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	sctx, cancel := storeCtx()
	defer cancel()
	if err := s.store.CreateVoice(sctx, v); err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusCreated, &voiceData{v: v, aliases: []string{}})
}

// newVoice builds the voice a validated create request describes. A remix
// takes the base voice's engine profile, and its language and settings
// unless the request gives its own.
func (s *Server) newVoice(in *voiceInput, p *control.Principal) (*control.Voice, error) {
	now := control.NowMS()
	v := &control.Voice{
		ID: control.NewID(), OrgID: p.WorkspaceID, Name: *in.name,
		Status: control.VoiceDraft, CloneMethod: "instant", Visibility: "private",
		PrimaryLanguage: "en", Labels: []control.Label{},
		ConsentAt: now, ConsentKeyID: p.KeyID, CreatedAt: now, UpdatedAt: now,
	}
	if in.baseVoiceID != "" {
		base, err := s.core.UsableVoice(p, in.baseVoiceID)
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
	if err := s.applyInput(v, in); err != nil {
		return nil, err
	}
	return v, nil
}

// applyInput copies the set fields of in onto v (create only; PATCH goes
// through control.VoiceUpdate so that the store applies it atomically).
func (s *Server) applyInput(v *control.Voice, in *voiceInput) error {
	if in.description != nil {
		v.Description = *in.description
	}
	if in.language != nil {
		if err := s.checkLanguage(*in.language); err != nil {
			return err
		}
		v.PrimaryLanguage = *in.language
	}
	if in.labels != nil {
		v.Labels = *in.labels
	}
	if in.settings != nil {
		v.Settings = *in.settings
	}
	if in.visibility != nil {
		v.Visibility = *in.visibility
	}
	return nil
}

// PATCH /voices/{id}: public and other workspaces' voices are 404.
func (s *Server) updateVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	if !control.ValidID(id) {
		s.writeError(ctx, errNotFound)
		return
	}
	in, err := parseVoiceUpdate(ctx.Request.Body(), s.cfg.MaxJSONBody)
	if err == nil && in.language != nil {
		err = s.checkLanguage(*in.language)
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	upd := control.VoiceUpdate{Name: in.name, Description: in.description, PrimaryLanguage: in.language,
		Labels: in.labels, Settings: in.settings, Visibility: in.visibility}
	sctx, cancel := storeCtx()
	defer cancel()
	v, err := s.store.UpdateVoice(sctx, p.WorkspaceID, id, upd)
	s.core.Voices().Invalidate(id)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	aliases, err := s.core.Aliases(ctx, p, v.ID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, &voiceData{v: v, aliases: aliases})
}

// DELETE /voices/{id}: the store also cancels the voice's pending job, and
// the voice's preview files go at once (media.go).
func (s *Server) deleteVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	if !control.ValidID(id) {
		s.writeError(ctx, errNotFound)
		return
	}
	sctx, cancel := storeCtx()
	defer cancel()
	err := s.store.DeleteVoice(sctx, p.WorkspaceID, id)
	s.core.Voices().Invalidate(id)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.removeMedia(id)
	s.writeData(ctx, fasthttp.StatusOK, &deletedData{id: id})
}

// aliasBody is the JSON of PUT /voices/{id}/aliases.
type aliasBody struct {
	Aliases *[]string `json:"aliases"`
}

// PUT /voices/{id}/aliases: the workspace's names for a voice it may use,
// replacing the whole list (docs/api.md#voice-aliases). The rules (shape,
// at most 32, unique in the workspace, not id-shaped) are the core's.
func (s *Server) putAliases(ctx *fasthttp.RequestCtx, p *control.Principal) {
	var in aliasBody
	if err := decodeJSON(ctx, s.cfg.MaxJSONBody, &in, nil); err != nil {
		s.writeError(ctx, err)
		return
	}
	if in.Aliases == nil {
		s.writeError(ctx, control.Errorf(control.EInvalidRequest, "aliases is required: a list of names (empty removes them all)"))
		return
	}
	id := pathID(ctx)
	aliases, err := s.core.SetAliases(ctx, p, id, *in.Aliases)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, &aliasData{voiceID: id, aliases: aliases})
}

// GET /voices/{id}/aliases
func (s *Server) getAliases(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	aliases, err := s.core.Aliases(ctx, p, id)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, &aliasData{voiceID: id, aliases: aliases})
}
