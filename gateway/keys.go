package gateway

import (
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Key management and usage for the dashboard (docs/api.md#api-keys-endpoints,
// docs/api.md#usage). Keys are made, listed and revoked with a dashboard
// session only; usage is readable with the session or any key.

const (
	keyNameMax = 100
	// keyExpiresMax bounds expires_in_s at ten years: far enough to mean
	// "long-lived", near enough that epoch milliseconds never overflow.
	keyExpiresMax = 10 * 365 * 24 * 3600
	// usageDays is how many days GET /usage reports, today included.
	usageDays = 30
)

func (s *Server) sessionRoutes(api *router.Group) {
	for _, r := range []struct {
		method, path string
		h            handlerFunc
	}{
		{"GET", "/keys", s.listKeys},
		{"POST", "/keys", s.createKey},
		{"DELETE", "/keys/{id}", s.revokeKey},
	} {
		s.handleSessionOnly(api, r.method, r.path, s.newRoute(r.method+" "+r.path, control.ScopeAnyKey, true), r.h)
	}
	s.handle(api, "GET", "/usage", s.newRoute("GET /usage", control.ScopeAnyKey, true), s.usage)
}

// handleSessionOnly is handle (middleware.go) for a route that takes the
// dashboard session alone (sessionOnly): same request id, CORS, metrics,
// log line and request-rate admission.
func (s *Server) handleSessionOnly(g *router.Group, method, path string, rt *route, h handlerFunc) {
	g.Handle(method, path, func(ctx *fasthttp.RequestCtx) {
		start := reqStart(ctx)
		s.begin(ctx, rt)
		defer s.finish(ctx, rt, start)
		p, err := s.sessionOnly(ctx)
		if err == nil {
			err = s.admitRequest(ctx, p)
		}
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		h(ctx, p)
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
func (s *Server) listKeys(ctx *fasthttp.RequestCtx, p *control.Principal) {
	c, cancel := storeCtx()
	defer cancel()
	keys, err := s.store.ListAPIKeys(c, p.WorkspaceID)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		out[i] = newKeyJSON(k)
	}
	s.writeData(ctx, fasthttp.StatusOK, jsonValue{map[string]any{"keys": out}})
}

type keyBody struct {
	Name       *string   `json:"name"`
	Scopes     *[]string `json:"scopes"`
	ExpiresInS *int64    `json:"expires_in_s"`
}

// POST /keys: a new key; its secret is in this answer only.
func (s *Server) createKey(ctx *fasthttp.RequestCtx, p *control.Principal) {
	k, err := s.newKey(ctx.Request.Body(), p)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	secret, hash := control.NewAPIKeySecret()
	k.Hash = hash
	c, cancel := storeCtx()
	defer cancel()
	if err := s.store.CreateAPIKey(c, k); err != nil {
		s.writeError(ctx, err)
		return
	}
	j := newKeyJSON(k)
	j.Key = secret
	ctx.Response.Header.SetCanonical(hdrCacheControl, hdrNoStore)
	s.writeData(ctx, fasthttp.StatusCreated, jsonValue{j})
}

// newKey validates a POST /keys body: scopes required (at least one known
// scope), a name of at most 100 characters, expires_in_s null or 60 s to
// ten years.
func (s *Server) newKey(body []byte, p *control.Principal) (*control.APIKey, error) {
	var in keyBody
	if err := decodeBody(body, s.cfg.MaxJSONBody, &in, nil); err != nil {
		return nil, err
	}
	k := &control.APIKey{ID: control.NewID(), WorkspaceID: p.WorkspaceID, CreatedAt: control.NowMS()}
	if in.Name != nil {
		k.Name = strings.TrimSpace(*in.Name)
		if utf8.RuneCountInString(k.Name) > keyNameMax || !control.DisplayText(k.Name) {
			return nil, control.Errorf(control.EInvalidRequest,
				"name: at most %d characters, without control or bidirectional formatting characters", keyNameMax)
		}
	}
	if in.Scopes == nil || len(*in.Scopes) == 0 {
		return nil, control.Errorf(control.EInvalidRequest, "scopes: choose at least one of tts, voices:read, voices:write, clone")
	}
	for _, sc := range *in.Scopes {
		if !control.ValidScope(sc) {
			return nil, control.Errorf(control.EInvalidRequest, "scopes: unknown scope %q", sc)
		}
		if !slices.Contains(k.Scopes, sc) {
			k.Scopes = append(k.Scopes, sc)
		}
	}
	if in.ExpiresInS != nil {
		n := *in.ExpiresInS
		if n < 60 || n > keyExpiresMax {
			return nil, control.Errorf(control.EInvalidRequest, "expires_in_s: between 60 and %d seconds, or null for a key that never expires", keyExpiresMax)
		}
		k.ExpiresAt = k.CreatedAt + n*1000
	}
	return k, nil
}

// DELETE /keys/{id}: revoke a key of the workspace. Every server stops
// taking it within 2 seconds (the change feed resets their key caches).
func (s *Server) revokeKey(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	if !control.ValidID(id) {
		s.writeError(ctx, errNotFound)
		return
	}
	c, cancel := storeCtx()
	defer cancel()
	k, err := s.store.GetAPIKey(c, id)
	if err == nil && k.WorkspaceID != p.WorkspaceID {
		err = errNotFound // another workspace's key is not there at all
	}
	if err == nil {
		k, err = s.store.RevokeAPIKey(c, id, control.NowMS())
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, jsonValue{newKeyJSON(k)})
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
func (s *Server) usage(ctx *fasthttp.RequestCtx, p *control.Principal) {
	now := time.Now().UTC()
	month := control.Month(now)
	c, cancel := storeCtx()
	defer cancel()
	bal, err := s.store.Balance(c, p.WorkspaceID, month, p.Limits.MonthlyChars)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	first := now.AddDate(0, 0, -(usageDays - 1))
	days, err := s.store.DailyUsage(c, p.WorkspaceID, control.Day(first), control.Day(now))
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	byDay := make(map[string]int64, len(days))
	for _, d := range days {
		byDay[d.Date] = d.Characters
	}
	out := usageJSON{Month: month, Used: bal.Used, Allowance: bal.Allowance, Credits: bal.Credits,
		Remaining: bal.Remaining(), Billing: p.Limits.Billing, Daily: make([]dailyJSON, usageDays)}
	for i := range out.Daily {
		d := control.Day(first.AddDate(0, 0, i))
		out.Daily[i] = dailyJSON{Date: d, Characters: byDay[d]}
	}
	ctx.Response.Header.SetCanonical(hdrCacheControl, hdrNoStore)
	s.writeData(ctx, fasthttp.StatusOK, jsonValue{out})
}
