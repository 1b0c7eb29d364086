package gateway

import (
	"strconv"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
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
	compatModelsPath = "/compat/models"
	compatVoicesPath = "/compat/audio/voices"
	compatModel      = "service-v1"
	// compatModelCreated is the model's "created" (Unix seconds): a fixed
	// date, so every replica and every restart answers the same list.
	compatModelCreated = 1767225600 // 2026-01-01T00:00:00Z
	// compatMaxVoicePages bounds one voices answer at 100 pages of 100:
	// the listing has no paging of its own.
	compatMaxVoicePages = 100
)

func (s *Server) compatListRoutes(g *router.Group) {
	for _, r := range []struct {
		path string
		h    handlerFunc
	}{{compatModelsPath, s.compatModels}, {compatVoicesPath, s.compatVoices}} {
		rt := s.apiRoute("GET "+r.path, control.ScopeTTS, withBearerKeys)
		s.handle(g, "GET", r.path, rt, r.h)
	}
}

// GET /compat/models
func (s *Server) compatModels(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	b := append([]byte(nil), `{"object":"list","data":[{"id":"`+compatModel+`","object":"model","created":`...)
	b = strconv.AppendInt(b, compatModelCreated, 10)
	b = append(b, `,"owned_by":"voicesvc"}]}`...)
	writeCompatJSON(ctx, b)
}

// GET /compat/audio/voices: every ready voice the workspace may speak with,
// its own and the public ones, named as the speech endpoint's voice field
// takes them (the alias where there is one).
func (s *Server) compatVoices(ctx *fasthttp.RequestCtx, p *control.Principal) {
	sctx, cancel := storeCtx()
	defer cancel()
	b := append([]byte(nil), `{"voices":[`...)
	f := control.VoiceFilter{WorkspaceID: p.WorkspaceID, Status: control.VoiceReady, PageSize: maxPageSize}
	n := 0
	for f.Page = 1; f.Page <= compatMaxVoicePages; f.Page++ {
		voices, total, err := s.store.ListVoices(sctx, f)
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		for _, v := range voices {
			if n > 0 {
				b = append(b, ',')
			}
			n++
			name := v.Alias
			if name == "" {
				name = v.ID
			}
			b = append(b, `{"id":`...)
			b = appendString(b, name)
			b = append(b, `,"name":`...)
			b = appendString(b, v.Name)
			b = append(b, `,"language":`...)
			b = appendString(b, v.PrimaryLanguage)
			b = append(b, '}')
		}
		if len(voices) == 0 || f.Page*f.PageSize >= total {
			break
		}
	}
	writeCompatJSON(ctx, append(b, "]}"...))
}

func writeCompatJSON(ctx *fasthttp.RequestCtx, b []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(b)
}
