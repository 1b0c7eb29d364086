package native

import (
	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/docs"
	"voicesvc/web"
)

// The documentation, served by the binary itself (docs/README.md): the
// Markdown guides rendered to HTML at /docs/, and the OpenAPI description
// at /openapi.yaml (and /docs/openapi.yaml, where the guides' relative
// links point). No credentials: the documents describe the API, they hold
// nothing of any workspace.

var (
	contentTypeYAML = []byte("application/yaml")
	valDocsCache    = []byte("public, max-age=300")
	// The documentation's CSPs: its pages carry no script and load
	// nothing (their styles are inline); the OpenAPI document is data.
	// Neither may be framed.
	valDocsCSP    = []byte("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	valOpenAPICSP = []byte("default-src 'none'; frame-ancestors 'none'")
)

func (n *Protocol) registerDocs(h web.Host) {
	// CORS on the OpenAPI document, so that API tools on other origins
	// can load it.
	h.Handle(web.Route{Method: "GET", Path: "/openapi.yaml", Root: true, CORS: true}, n.openAPI)
	// The index, README.md, is at /docs/ (its relative links need the
	// slash). The router cannot also hold /docs: it would clash with /docs/.
	h.Handle(web.Route{Method: "GET", Path: "/docs/", Root: true, Name: "GET /docs/{page}"},
		func(ctx *fasthttp.RequestCtx, _ *control.Principal) { n.docsPage(ctx, "README.md") })
	h.Handle(web.Route{Method: "GET", Path: "/docs/{page}", Root: true}, func(ctx *fasthttp.RequestCtx, p *control.Principal) {
		name, _ := ctx.UserValue("page").(string)
		if name == "openapi.yaml" {
			n.openAPI(ctx, p)
			return
		}
		n.docsPage(ctx, name)
	})
}

func (n *Protocol) openAPI(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	pageHeaders(ctx, valOpenAPICSP)
	ctx.Response.Header.SetCanonical(hdrCacheControl, valDocsCache)
	ctx.SetContentTypeBytes(contentTypeYAML)
	ctx.SetBody(docs.OpenAPI())
}

func (n *Protocol) docsPage(ctx *fasthttp.RequestCtx, name string) {
	pageHeaders(ctx, valDocsCSP)
	b, ok := docs.HTML(name)
	if !ok {
		n.h.WriteError(ctx, errNotFound)
		return
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valDocsCache)
	ctx.SetContentTypeBytes(contentTypeHTML)
	ctx.SetBody(b)
}
