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
	b := append([]byte(nil), `{"object":"list","data":[{"id":"`+model+`","object":"model","created":`...)
	b = strconv.AppendInt(b, modelCreated, 10)
	b = append(b, `,"owned_by":"voicesvc"}]}`...)
	writeJSON(ctx, b)
}

// GET /compat/audio/voices: every ready voice the workspace may speak with,
// its own and the public ones, named as the speech endpoint's voice field
// takes them (the alias where there is one).
func (o *Protocol) voices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	voices, err := o.h.Core().UsableVoices(ctx, p, maxVoices)
	if err != nil {
		o.h.WriteError(ctx, err)
		return
	}
	b := append([]byte(nil), `{"voices":[`...)
	for i, v := range voices {
		if i > 0 {
			b = append(b, ',')
		}
		name := v.Alias
		if name == "" {
			name = v.ID
		}
		b = append(b, `{"id":`...)
		b = jsonw.AppendString(b, name)
		b = append(b, `,"name":`...)
		b = jsonw.AppendString(b, v.Name)
		b = append(b, `,"language":`...)
		b = jsonw.AppendString(b, v.PrimaryLanguage)
		b = append(b, '}')
	}
	writeJSON(ctx, append(b, "]}"...))
}

func writeJSON(ctx *fasthttp.RequestCtx, b []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(b)
}
