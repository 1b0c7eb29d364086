package gateway

import "github.com/valyala/fasthttp"

// hasAuthorization reports whether the request carries an Authorization
// header of any scheme, empty or not. Any such header turns the dashboard's
// session cookie off (docs/api.md#dashboard-sessions): a request that
// names a credential of its own, Basic included, is never the session's.
func hasAuthorization(ctx *fasthttp.RequestCtx) bool {
	return len(ctx.Request.Header.PeekAll(string(hdrAuthorization))) > 0
}
