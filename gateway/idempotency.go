package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

// Idempotency-Key (docs/api.md#synthesis) on POST /voices, clone, enroll
// and speak, as a wrapper around the handler so that handlers know nothing
// of it:
//
//   - The key is 1-255 printable ASCII, else 400 invalid_request.
//   - It is remembered 24 hours per workspace (the store purges older ones),
//     with the fingerprint of the request: method, path and a SHA-256 of the
//     body (of the multipart parts for uploads, so that a client that picks a
//     new boundary on retry still matches).
//   - The first request claims the key in the store (BeginIdempotent, one
//     atomic insert, so that this holds across servers), runs, and stores
//     its status, the headers in replayHeaders and its body.
//   - A retry with the same request gets that response again with
//     `Idempotent-Replayed: true`; it runs nothing, so it holds no slot and
//     is not billed. The same key for a different request is 422
//     idempotency_key_reused; while the first still runs, 409
//     idempotency_in_progress.
//   - Only requests that ran are remembered: a 2xx, or 422 invalid_input
//     (the engine refused the text). Anything else, refusals before running
//     (400, 402, 403, 404, 409, 429) and server errors (5xx) included, frees
//     the key (AbandonIdempotent), so that a retry runs again; so does a
//     panic.
//
// speak buffers its audio whenever the header is sent (dialect/native), so the
// body is in the response when the handler returns. A handler that streams
// its body anyway is answered as usual but not remembered.

const idempotencyKeyMax = 255

var (
	hdrIdempotentReplayed = []byte("Idempotent-Replayed")
	valTrue               = []byte("true")
	// replayHeaders are the response headers stored with an idempotent
	// response and sent again on replay. Request ids, CORS and rate-limit
	// headers belong to each request and are made fresh.
	replayHeaders = []string{"Content-Type", "X-Sample-Rate", "X-Audio-Format", "X-Channels",
		"X-Billing-Remaining", "Location"}
	errIdempotencyKey = control.Errorf(control.EInvalidRequest, "Idempotency-Key must be 1-255 printable ASCII characters")
)

// idempotent wraps h with Idempotency-Key handling. Requests without the
// header go straight to h. fingerprint, when set, hashes a body the
// handler reads itself (web.Route.Fingerprint: uploads).
func (s *Server) idempotent(h handlerFunc, fingerprint func(*fasthttp.RequestCtx, *control.Principal) ([]byte, error)) handlerFunc {
	return func(ctx *fasthttp.RequestCtx, p *control.Principal) {
		raw := ctx.Request.Header.PeekBytes(hdrIdempotencyKey)
		if len(raw) == 0 {
			h(ctx, p)
			return
		}
		if !printableASCII(raw, idempotencyKeyMax) {
			s.writeError(ctx, errIdempotencyKey)
			return
		}
		key := string(raw)
		fp, err := s.fingerprint(ctx, p, fingerprint)
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		c, cancel := storeCtx()
		stored, err := s.store.BeginIdempotent(c, p.WorkspaceID, key, fp, control.NowMS())
		cancel()
		if err != nil {
			s.writeError(ctx, err)
			return
		}
		if stored != nil {
			replay(ctx, stored)
			return
		}
		s.runIdempotent(ctx, p, key, h)
	}
}

// runIdempotent runs h for a claimed key and stores or frees the key.
func (s *Server) runIdempotent(ctx *fasthttp.RequestCtx, p *control.Principal, key string, h handlerFunc) {
	ws := p.WorkspaceID // p must not be used after h returns
	done := false
	defer func() {
		if done {
			return
		}
		// h panicked: free the key, then let the route wrapper answer.
		s.abandonIdempotent(ws, key)
		panic(recover())
	}()
	h(ctx, p)
	done = true

	status := ctx.Response.StatusCode()
	if !rememberStatus(status, ctx) || ctx.Response.IsBodyStream() {
		s.abandonIdempotent(ws, key)
		return
	}
	resp := &control.IdempotentResponse{Status: status, Headers: map[string]string{},
		Body: append([]byte(nil), ctx.Response.Body()...)}
	for _, name := range replayHeaders {
		if v := ctx.Response.Header.Peek(name); len(v) > 0 {
			resp.Headers[name] = string(v)
		}
	}
	c, cancel := storeCtx()
	err := s.store.FinishIdempotent(c, ws, key, resp)
	cancel()
	if err != nil {
		// The answer stands; the key stays claimed until it expires, so a
		// retry answers 409 rather than running twice.
		s.log.Error("storing idempotent response failed", "workspace", ws,
			"request_id", string(web.RequestID(ctx)), "err", err)
	}
}

// rememberStatus: a 2xx, or a 422 invalid_input (the request ran and the
// engine refused it; running it again gives the same answer).
func rememberStatus(status int, ctx *fasthttp.RequestCtx) bool {
	if status >= 200 && status < 300 {
		return true
	}
	return status == fasthttp.StatusUnprocessableEntity &&
		bytes.Contains(ctx.Response.Body(), []byte(`"code":"`+control.EInvalidInput+`"`))
}

func (s *Server) abandonIdempotent(ws, key string) {
	c, cancel := storeCtx()
	defer cancel()
	if err := s.store.AbandonIdempotent(c, ws, key); err != nil {
		s.log.Error("freeing idempotency key failed", "workspace", ws, "err", err)
	}
}

// replay answers with a stored response.
func replay(ctx *fasthttp.RequestCtx, r *control.IdempotentResponse) {
	ctx.SetStatusCode(r.Status)
	for name, v := range r.Headers {
		ctx.Response.Header.Set(name, v)
	}
	ctx.Response.Header.SetCanonical(hdrIdempotentReplayed, valTrue)
	ctx.Response.SetBody(r.Body)
}

// fingerprint is "METHOD PATH BODYHASH". An upload's body is streamed,
// not in memory: the route's own hash receives it (the native uploads
// hash their parts one by one, so that the random boundary of the encoding
// does not count), and an upload that cannot be received is refused before
// the key is claimed.
func (s *Server) fingerprint(ctx *fasthttp.RequestCtx, p *control.Principal,
	hash func(*fasthttp.RequestCtx, *control.Principal) ([]byte, error)) (string, error) {
	var sum []byte
	if hash != nil {
		var err error
		if sum, err = hash(ctx, p); err != nil {
			return "", err
		}
	} else {
		h := sha256.Sum256(ctx.Request.Body())
		sum = h[:]
	}
	return string(ctx.Method()) + " " + string(ctx.Path()) + " " + hex.EncodeToString(sum), nil
}
