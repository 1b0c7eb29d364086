package gateway

import (
	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/docs"
)

// The documentation, served by the binary itself (docs/README.md): the
// Markdown guides rendered to HTML at /docs/, and the OpenAPI description
// at /openapi.yaml (and /docs/openapi.yaml, where the guides' relative
// links point). No credentials: the documents describe the API, they hold
// nothing of any workspace.

var (
	contentTypeHTML = []byte("text/html; charset=utf-8")
	contentTypeYAML = []byte("application/yaml")
	hdrCSP          = []byte("Content-Security-Policy")
	valDocsCache    = []byte("public, max-age=300")
)

// docsRoutes registers the documentation routes (called from routes).
func (s *Server) docsRoutes(r *router.Router) {
	// CORS on the OpenAPI document, so that API tools on other origins can
	// load it.
	r.GET("/openapi.yaml", s.plain(s.newRoute("GET /openapi.yaml", "", true), s.openAPI))
	// The index, README.md, is at /docs/ (its relative links need the
	// slash). This router cannot also hold /docs: it would clash with /docs/.
	docsRoute := s.newRoute("GET /docs/{page}", "", false)
	r.GET("/docs/", s.plain(docsRoute, func(ctx *fasthttp.RequestCtx) { s.docsPage(ctx, "README.md") }))
	r.GET("/docs/{page}", s.plain(docsRoute, func(ctx *fasthttp.RequestCtx) {
		name, _ := ctx.UserValue("page").(string)
		if name == "openapi.yaml" {
			s.openAPI(ctx)
			return
		}
		s.docsPage(ctx, name)
	}))
}

func (s *Server) openAPI(ctx *fasthttp.RequestCtx) {
	docsHeaders(ctx, valOpenAPICSP)
	ctx.Response.Header.SetCanonical(hdrCacheControl, valDocsCache)
	ctx.SetContentTypeBytes(contentTypeYAML)
	ctx.SetBody(docs.OpenAPI())
}

func (s *Server) docsPage(ctx *fasthttp.RequestCtx, name string) {
	docsHeaders(ctx, valDocsCSP)
	b, ok := docs.HTML(name)
	if !ok {
		s.writeError(ctx, errNotFound)
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valDocsCache)
	ctx.SetContentTypeBytes(contentTypeHTML)
	ctx.SetBody(b)
}
