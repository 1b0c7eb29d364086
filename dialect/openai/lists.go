package openai

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/jsonw"
)

// The compatible endpoint's listings (docs/api.md#compatible-speech), in the
// third-party shapes rather than the envelope, so that its clients' model
// and voice pickers work against {api_root}/compat:
//
//	GET /compat/models        {"object":"list","data":[{"id":"service-v1","object":"model","created":...,"owned_by":"voicesvc"}]}
//	GET /compat/audio/voices  {"voices":[{"id":"<alias or id>","name":"...","language":"en"}]}
//
// Both take the speech endpoint's credentials (an API key with the tts
// scope, as a bearer key or X-API-Key; tokens are 401) and answer errors in
// its shape.

const (
	model = "service-v1"
	// modelCreated is the model's "created" (Unix seconds): a fixed
	// date, so every replica and every restart answers the same list.
	modelCreated = 1767225600 // 2026-01-01T00:00:00Z
	// maxVoices bounds one voices answer (100 pages of 100): the listing
	// has no paging of its own.
	maxVoices = 10_000
)

// GET /compat/models
func (o *Protocol) models(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	b := append([]byte(nil), `{"object":"list","data":[`...)
	writeJSON(ctx, append(appendModel(b, model), "]}"...))
}

// appendModel writes the model object named id.
func appendModel(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = jsonw.AppendString(b, id)
	b = append(b, `,"object":"model","created":`...)
	b = strconv.AppendInt(b, modelCreated, 10)
	return append(b, `,"owned_by":"voicesvc"}`...)
}

// GET /compat/audio/voices: every ready voice the workspace may speak with,
// its own and the public ones, named as the speech endpoint's voice field
// takes them (the alias where there is one).
func (o *Protocol) voices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	voices, err := o.h.Core().UsableVoicesWithAliases(ctx, p, maxVoices)
	if err != nil {
		o.h.WriteError(ctx, err)
		return
	}
	b := append([]byte(nil), `{"voices":[`...)
	n := 0
	entry := func(id string, v *control.Voice) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		b = jsonw.AppendString(b, id)
		b = append(b, `,"name":`...)
		b = jsonw.AppendString(b, v.Name)
		b = append(b, `,"language":`...)
		b = jsonw.AppendString(b, v.PrimaryLanguage)
		b = append(b, '}')
	}
	for _, u := range voices {
		name := u.Voice.Alias
		if name == "" {
			name = u.Voice.ID
		}
		entry(name, u.Voice)
		// The workspace's own names for it, each usable as voice.
		for _, a := range u.Aliases {
			entry(a, u.Voice)
		}
	}
	writeJSON(ctx, append(b, "]}"...))
}

// GET /compat/models/{model}: the model object of any name, since every
// model name routes to the one model there is; its id is the name asked
// for, so a client that checks its configured model finds it.
func (o *Protocol) model(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	name, _ := ctx.UserValue("model").(string)
	writeJSON(ctx, appendModel(nil, name))
}

func writeJSON(ctx *fasthttp.RequestCtx, b []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(b)
}
