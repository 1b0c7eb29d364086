package deepgram

import (
	"bytes"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Deepgram's credential forms, each resolved by the host (AuthKey,
// AuthToken), which leaves the scope and the request rate to the route:
//
//	Authorization: Token KEY      an API key (the SDKs' and plugins' form)
//	Authorization: Bearer CRED    an API key or a voicesvc access token
//	Sec-WebSocket-Protocol: token, KEY    (browsers, which cannot set headers)
//	Sec-WebSocket-Protocol: bearer, CRED
//
// A credential is an access token when it has the token prefix (vst_), an
// API key otherwise, whatever the scheme says. The header wins over the
// subprotocol; the first form present decides, a bad one is 401.

var (
	hdrAuthorization = []byte("Authorization")
	hdrWSProtocol    = []byte("Sec-WebSocket-Protocol")
	schemeToken      = []byte("token")
	schemeBearer     = []byte("bearer")
	errUnauthorized  = control.Errorf(control.EUnauthorized, "missing or invalid credentials: send Authorization: Token <voicesvc API key>")
)

// authenticate finds the principal of a request in Deepgram's forms.
func (d *Protocol) authenticate(ctx *fasthttp.RequestCtx) (*control.Principal, error) {
	cred := authorization(ctx.Request.Header.PeekBytes(hdrAuthorization))
	if cred == nil {
		cred = protocolCredential(ctx.Request.Header.PeekBytes(hdrWSProtocol))
	}
	if len(cred) == 0 {
		return nil, errUnauthorized
	}
	if bytes.HasPrefix(cred, []byte(control.AccessTokenPrefix)) {
		return d.h.AuthToken(cred)
	}
	return d.h.AuthKey(cred)
}

// authorization is the credential of `Authorization: Token CRED` or
// `Bearer CRED` (schemes case-insensitive); nil when the header is absent,
// empty (a refusal) when it has another scheme or no credential.
func authorization(h []byte) []byte {
	if len(h) == 0 {
		return nil
	}
	scheme, cred, _ := bytes.Cut(bytes.TrimSpace(h), []byte(" "))
	if !bytes.EqualFold(scheme, schemeToken) && !bytes.EqualFold(scheme, schemeBearer) {
		return []byte{}
	}
	if cred = bytes.TrimSpace(cred); cred == nil {
		return []byte{} // a scheme alone: refused, not the next form
	}
	return cred
}

// protocolCredential is the credential of a subprotocol list
// `token, CRED` or `bearer, CRED` (other items, such as the SDK's
// x-deepgram-session-id pair, may follow); nil when there is none.
func protocolCredential(h []byte) []byte {
	prev := []byte(nil)
	for len(h) > 0 {
		item := h
		if i := bytes.IndexByte(h, ','); i >= 0 {
			item, h = h[:i], h[i+1:]
		} else {
			h = nil
		}
		item = bytes.TrimSpace(item)
		if bytes.EqualFold(prev, schemeToken) || bytes.EqualFold(prev, schemeBearer) {
			return item
		}
		prev = item
	}
	return nil
}
