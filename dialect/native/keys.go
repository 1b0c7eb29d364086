package native

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/web"
)

// Access tokens (docs/api.md#access-tokens), and the keys and usage of the
// dashboard (docs/api.md#api-keys-endpoints, #usage). The core makes,
// checks and spends them (synth/grants.go, credentials.go, admit.go);
// keys are made, listed and revoked with a dashboard session only.

var valNoStore = []byte("no-store")

func (n *Protocol) registerKeys(h web.Host) {
	h.Handle(web.Route{Method: "POST", Path: "/tokens", Scope: control.ScopeTTS}, n.createToken)
	h.Handle(web.Route{Method: "GET", Path: "/keys", Scope: control.ScopeAnyKey, Creds: web.SessionOnly}, n.listKeys)
	h.Handle(web.Route{Method: "POST", Path: "/keys", Scope: control.ScopeAnyKey, Creds: web.SessionOnly}, n.createKey)
	h.Handle(web.Route{Method: "DELETE", Path: "/keys/{id}", Scope: control.ScopeAnyKey, Creds: web.SessionOnly}, n.revokeKey)
	h.Handle(web.Route{Method: "GET", Path: "/usage", Scope: control.ScopeAnyKey}, n.usage)
}

// tokenBody is the body of POST /tokens; both fields are optional.
type tokenBody struct {
	TTLSeconds *int64    `json:"ttl_seconds"`
	VoiceIDs   *[]string `json:"voice_ids"`
}

var tokenFieldCodes = fieldCodes{"ttl_seconds": control.EInvalidTTL, "voice_ids": control.EInvalidVoiceID}

// POST /tokens: mint an access token for the caller's workspace. Only API
// keys and dashboard sessions reach this handler (the host refuses tokens
// on this route).
func (n *Protocol) createToken(ctx *fasthttp.RequestCtx, p *control.Principal) {
	var in tokenBody
	var t *synth.NewToken
	err := decodeBody(ctx.Request.Body(), &in, tokenFieldCodes)
	if err == nil {
		t, err = n.h.Core().CreateToken(ctx, p, in.TTLSeconds, in.VoiceIDs)
	}
	if err == nil {
		ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	}
	n.answer(ctx, err, fasthttp.StatusCreated, func(b []byte) []byte {
		b = append(b, `{"token":`...)
		b = appendString(b, t.Secret)
		b = append(b, `,"expires_at":`...)
		b = strconv.AppendInt(b, t.ExpiresAt, 10)
		b = append(b, `,"ttl_seconds":`...)
		b = strconv.AppendInt(b, t.TTLSeconds, 10)
		return append(b, '}')
	})
}

// keyJSON is a key as the dashboard shows it; the secret is in Key, and only
// in the answer that created it.
type keyJSON struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Key       string   `json:"key,omitempty"`
	Scopes    []string `json:"scopes"`
	Legacy    bool     `json:"legacy"`
	ExpiresAt *int64   `json:"expires_at"`
	RevokedAt *int64   `json:"revoked_at"`
	CreatedAt int64    `json:"created_at"`
}

func newKeyJSON(k *control.APIKey) keyJSON {
	j := keyJSON{ID: k.ID, Name: k.Name, Scopes: control.NonNil(k.Scopes), Legacy: k.Legacy, CreatedAt: k.CreatedAt}
	if k.ExpiresAt != 0 {
		j.ExpiresAt = &k.ExpiresAt
	}
	if k.RevokedAt != 0 {
		j.RevokedAt = &k.RevokedAt
	}
	return j
}

// GET /keys: the workspace's keys, newest first, revoked ones included.
func (n *Protocol) listKeys(ctx *fasthttp.RequestCtx, p *control.Principal) {
	keys, err := n.h.Core().ListKeys(ctx, p)
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = newKeyJSON(k)
	}
	n.answer(ctx, err, fasthttp.StatusOK, web.Marshal(map[string]any{"keys": out}))
}

type keyBody struct {
	Name       *string   `json:"name"`
	Scopes     *[]string `json:"scopes"`
	ExpiresInS *int64    `json:"expires_in_s"`
}

// POST /keys: a new key; its secret is in this answer only.
func (n *Protocol) createKey(ctx *fasthttp.RequestCtx, p *control.Principal) {
	var in keyBody
	if err := decodeBody(ctx.Request.Body(), &in, nil); err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	k, secret, err := n.h.Core().CreateKey(ctx, p, synth.KeyFields{Name: in.Name, Scopes: in.Scopes, ExpiresInS: in.ExpiresInS})
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	j := newKeyJSON(k)
	j.Key = secret
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	web.WriteData(ctx, fasthttp.StatusCreated, web.Marshal(j))
}

// DELETE /keys/{id}: revoke a key of the workspace.
func (n *Protocol) revokeKey(ctx *fasthttp.RequestCtx, p *control.Principal) {
	k, err := n.h.Core().RevokeKey(ctx, p, pathID(ctx))
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	web.WriteData(ctx, fasthttp.StatusOK, web.Marshal(newKeyJSON(k)))
}

// usageJSON is GET /usage: this UTC month's balance and the characters of
// each of the last 30 days (today last, days without usage as 0).
type usageJSON struct {
	Month     string      `json:"month"`
	Used      int64       `json:"used"`
	Allowance int64       `json:"allowance"`
	Credits   int64       `json:"credits"`
	Remaining int64       `json:"remaining"`
	Billing   string      `json:"billing"`
	Daily     []dailyJSON `json:"daily"`
}

type dailyJSON struct {
	Date       string `json:"date"`
	Characters int64  `json:"characters"`
}

// GET /usage: a session or any key of the workspace.
func (n *Protocol) usage(ctx *fasthttp.RequestCtx, p *control.Principal) {
	u, err := n.h.Core().Usage(ctx, p)
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	b := u.Balance
	out := usageJSON{Month: u.Month, Used: b.Used, Allowance: b.Allowance, Credits: b.Credits,
		Remaining: b.Remaining(), Billing: u.Billing, Daily: make([]dailyJSON, len(u.Daily))}
	for i, d := range u.Daily {
		out.Daily[i] = dailyJSON{Date: d.Date, Characters: d.Characters}
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, valNoStore)
	web.WriteData(ctx, fasthttp.StatusOK, web.Marshal(out))
}
