package native

import (
	"encoding/json"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/web"
)

// The voices resource (docs/api.md#voices), its aliases, its jobs and its
// preview clips (media). Each
// handler decodes, asks the core (which holds every rule), and writes the
// data or the error.

func (n *Protocol) registerVoices(h web.Host) {
	for _, r := range []struct {
		method, path, scope string
		idempotent          bool
		handler             web.Handler
	}{
		{"GET", "/voices", control.ScopeVoicesRead, false, n.listVoices},
		{"POST", "/voices", control.ScopeVoicesWrite, true, n.createVoice},
		{"GET", "/voices/{id}", control.ScopeVoicesRead, false, n.getVoice},
		{"PATCH", "/voices/{id}", control.ScopeVoicesWrite, false, n.updateVoice},
		{"DELETE", "/voices/{id}", control.ScopeVoicesWrite, false, n.deleteVoice},
		{"GET", "/voices/{id}/aliases", control.ScopeVoicesRead, false, n.getAliases},
		{"PUT", "/voices/{id}/aliases", control.ScopeVoicesWrite, false, n.putAliases},
		{"GET", "/jobs/{id}", control.ScopeVoicesRead, false, n.getJob},
	} {
		h.Handle(web.Route{Method: r.method, Path: r.path, Scope: r.scope, Idempotent: r.idempotent}, r.handler)
	}
	h.Handle(web.Route{Method: "GET", Path: "/media/{name}", Root: true, CORS: true}, n.media)
}

// answer writes data, or err when there is one.
func (n *Protocol) answer(ctx *fasthttp.RequestCtx, err error, status int, data func([]byte) []byte) {
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	web.WriteData(ctx, status, data)
}

// GET /voices/{id}: the workspace's own voice or a public one.
func (n *Protocol) getVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	v, aliases, err := n.h.Core().GetVoice(ctx, p, pathID(ctx))
	n.answer(ctx, err, fasthttp.StatusOK, voiceData(v, aliases))
}

// GET /voices: the workspace's voices, then ready public catalog voices.
func (n *Protocol) listVoices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	args := ctx.QueryArgs()
	arg := func(name string) *string {
		if !args.Has(name) {
			return nil
		}
		v := string(args.Peek(name))
		return &v
	}
	page, err := n.h.Core().ListVoices(ctx, p, synth.VoiceQuery{Page: arg("page"), PageSize: arg("page_size"),
		Visibility: arg("visibility"), Status: arg("status"), Language: arg("language")})
	n.answer(ctx, err, fasthttp.StatusOK, func(b []byte) []byte { return appendVoicePage(b, page) })
}

// voiceBody is the JSON of POST /voices and PATCH /voices/{id}. Pointers
// tell "absent" from "empty"; settings stays raw so that its errors, type
// errors included, answer invalid_settings.
type voiceBody struct {
	Name            *string          `json:"name"`
	Description     *string          `json:"description"`
	PrimaryLanguage *string          `json:"primary_language"`
	Labels          *[]control.Label `json:"labels"`
	Settings        json.RawMessage  `json:"settings"`
	Visibility      *string          `json:"visibility"`
	BaseVoiceID     *string          `json:"base_voice_id"` // create only
	Consent         *bool            `json:"consent"`       // create only
}

var voiceFieldCodes = fieldCodes{
	"settings":         control.EInvalidSettings,
	"consent":          control.EConsentRequired,
	"primary_language": control.EInvalidLanguage,
	"base_voice_id":    control.EInvalidVoiceID,
}

// decodeVoice decodes a voice body into the core's fields.
func decodeVoice(body []byte) (*synth.VoiceFields, error) {
	var vb voiceBody
	if err := decodeBody(body, &vb, voiceFieldCodes); err != nil {
		return nil, err
	}
	return &synth.VoiceFields{Name: vb.Name, Description: vb.Description, Language: vb.PrimaryLanguage,
		Labels: vb.Labels, Settings: vb.Settings, Visibility: vb.Visibility, BaseVoiceID: vb.BaseVoiceID,
		Consent: vb.Consent}, nil
}

// POST /voices: a draft voice, or with base_voice_id a ready remix.
func (n *Protocol) createVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	f, err := decodeVoice(ctx.Request.Body())
	var v *control.Voice
	if err == nil {
		v, err = n.h.Core().CreateVoice(ctx, p, f)
	}
	n.answer(ctx, err, fasthttp.StatusCreated, voiceData(v, []string{}))
}

// PATCH /voices/{id}: public and other workspaces' voices are 404.
func (n *Protocol) updateVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	if !control.ValidID(pathID(ctx)) { // before the body: an unknown voice is 404 whatever was sent
		n.h.WriteError(ctx, errNotFound)
		return
	}
	f, err := decodeVoice(ctx.Request.Body())
	var v *control.Voice
	var aliases []string
	if err == nil {
		v, aliases, err = n.h.Core().UpdateVoice(ctx, p, pathID(ctx), f)
	}
	n.answer(ctx, err, fasthttp.StatusOK, voiceData(v, aliases))
}

// DELETE /voices/{id}
func (n *Protocol) deleteVoice(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	err := n.h.Core().DeleteVoice(ctx, p, id)
	n.answer(ctx, err, fasthttp.StatusOK, func(b []byte) []byte {
		b = append(b, `{"id":`...)
		b = appendString(b, id)
		return append(b, `,"deleted":true}`...)
	})
}

// aliasBody is the JSON of PUT /voices/{id}/aliases.
type aliasBody struct {
	Aliases *[]string `json:"aliases"`
}

// PUT /voices/{id}/aliases: the workspace's names for a voice it may use,
// replacing the whole list (docs/api.md#voice-aliases). The rules (shape,
// at most 32, unique in the workspace, not id-shaped) are the core's.
func (n *Protocol) putAliases(ctx *fasthttp.RequestCtx, p *control.Principal) {
	var in aliasBody
	err := decodeBody(ctx.Request.Body(), &in, nil)
	if err == nil && in.Aliases == nil {
		err = control.Errorf(control.EInvalidRequest, "aliases is required: a list of names (empty removes them all)")
	}
	var aliases []string
	if err == nil {
		aliases, err = n.h.Core().SetAliases(ctx, p, pathID(ctx), *in.Aliases)
	}
	n.answer(ctx, err, fasthttp.StatusOK, aliasData(pathID(ctx), aliases))
}

// GET /voices/{id}/aliases
func (n *Protocol) getAliases(ctx *fasthttp.RequestCtx, p *control.Principal) {
	aliases, err := n.h.Core().Aliases(ctx, p, pathID(ctx))
	n.answer(ctx, err, fasthttp.StatusOK, aliasData(pathID(ctx), aliases))
}

// GET /jobs/{id}: a clone job of the key's workspace; the data is the job
// itself (docs/api.md#get-a-job).
func (n *Protocol) getJob(ctx *fasthttp.RequestCtx, p *control.Principal) {
	j, err := n.h.Core().Job(ctx, p, pathID(ctx))
	n.answer(ctx, err, fasthttp.StatusOK, func(b []byte) []byte { return appendJob(b, j) })
}

var errNotFound = control.Errorf(control.ENotFound, "not found")

var valMediaCache = []byte("public, no-cache")

// GET /media/{name} (at the host's root): clone previews written by the
// job runner. Public, like the sample_audio_url that points here: the
// names carry two random 96-bit ids. The core finds the file only while
// its voice exists (synth.Service.Media); caches may keep a copy but must
// ask again (no-cache), so a delete is not hidden behind a day of max-age.
func (n *Protocol) media(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	name, _ := ctx.UserValue("name").(string)
	f, size, err := n.h.Core().Media(name)
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	ctx.Response.Header.SetContentType("audio/wav")
	ctx.Response.Header.SetCanonical(hdrCacheControl, valMediaCache)
	ctx.Response.Header.Set("Content-Length", strconv.FormatInt(size, 10))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyStream(f, int(size)) // fasthttp closes f
}
