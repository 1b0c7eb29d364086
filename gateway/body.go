package gateway

import (
	"bytes"
	"io"
	"sync"

	"github.com/valyala/fasthttp"

	"voicesvc/netguard"
)

// serveBody is the handler behind the drain (serveHTTP). A body announced
// over its route's limit is answered 413 at once (requestConfig). Bodies
// are streamed (New): every route but the uploads takes a JSON body, read
// here in full before routing, up to MaxJSONBody (413 beyond it), so that
// handlers use ctx.Request.Body() as usual. Upload bodies are left to
// their handlers, which authenticate first; when an upload body is not
// read to its end, the connection is closed after the answer rather than
// its rest read as the next request.
func (s *Server) serveBody(ctx *fasthttp.RequestCtx) {
	if _, ok := s.tooLarge.LoadAndDelete(&ctx.Request.Header); ok {
		s.serveError(ctx, fasthttp.ErrBodyTooLarge)
		return
	}
	if !s.isUploadRequest(ctx) {
		if err := s.readBody(ctx); err != nil {
			s.serveError(ctx, err)
			return
		}
		s.router.Handler(ctx)
		return
	}
	s.router.Handler(ctx)
	// What the upload's handler left open (its temporary file, its
	// admission) is released now, not when fasthttp resets the request.
	ctx.VisitUserValues(func(_ []byte, v any) {
		if c, ok := v.(io.Closer); ok {
			c.Close()
		}
	})
	u, _ := ctx.UserValue(uploadBodyKey).(*uploadReader)
	if ctx.Request.IsBodyStream() && ctx.Request.Header.ContentLength() != 0 && (u == nil || !u.eof) {
		dropConnection(ctx)
	}
}

// bodyBuffers recycles the buffers readBody reads streamed bodies into.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody reads a streamed JSON body into the request, at most
// MaxJSONBody bytes; more is fasthttp.ErrBodyTooLarge (413), whether the
// Content-Length announced it or chunks brought it.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) error {
	if !ctx.Request.IsBodyStream() {
		return nil
	}
	max := s.cfg.MaxJSONBody
	n := ctx.Request.Header.ContentLength()
	switch {
	case n > max:
		return fasthttp.ErrBodyTooLarge
	case n >= 0 && n <= 8<<10:
		// fasthttp read bodies this small whole before the handler, so
		// Body() copies them from memory and cannot fail.
		ctx.Request.Body()
		return nil
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 2*max {
			bodyBuffers.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(io.LimitReader(ctx.RequestBodyStream(), int64(max)+1)); err != nil {
		return err
	}
	if buf.Len() > max {
		return fasthttp.ErrBodyTooLarge
	}
	ctx.Request.SetBody(buf.Bytes())
	return nil
}

// isUploadRequest: POST to an upload route.
func (s *Server) isUploadRequest(ctx *fasthttp.RequestCtx) bool {
	return ctx.IsPost() && s.isUploadPath(ctx.Path())
}

// dropConnection closes the connection after this answer, with a lingering
// close (netguard.Conn.Linger) so that a client still sending its body
// reads the answer instead of a reset.
func dropConnection(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if c, ok := ctx.Conn().(*netguard.Conn); ok {
		c.Linger()
	}
}
