package gateway

import "github.com/valyala/fasthttp"

// The documentation's CSPs: its pages carry no script and load nothing
// (their styles are inline); the OpenAPI document is data. Neither may be
// framed.
var (
	valDocsCSP    = []byte("default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	valOpenAPICSP = []byte("default-src 'none'; frame-ancestors 'none'")
)

// docsHeaders are on every documentation response, as secureHeaders are
// on the dashboard's: the policy csp, no sniffing, no framing, no referrer
// to other sites.
func docsHeaders(ctx *fasthttp.RequestCtx, csp []byte) {
	h := &ctx.Response.Header
	h.SetCanonical(hdrCSP, csp)
	h.SetCanonical(hdrNoSniff, valNoSniff)
	h.SetCanonical(hdrReferrerPolicy, valNoReferrer)
	h.SetCanonical(hdrFrameOptions, valDeny)
}
