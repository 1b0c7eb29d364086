package gateway

import (
	"bytes"
	"errors"
	"io"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Upload bodies (web.Route.Upload: enroll and clone). The server streams
// them (fasthttp's StreamRequestBody): a Content-Length reserves nothing,
// the route wrapper has authenticated the caller before the first byte of
// the body is read, and the protocol's handler reads it through
// uploadBody, which enforces, while it arrives:
//
//   - a declared Content-Length over MaxUploadBody: 413 before reading;
//   - a body that grows past MaxUploadBody, chunked or not (413);
//   - one that stops arriving for UploadIdleTimeout, or is not complete
//     after UploadReadTimeout (400).
//
// Whatever the answer, a body not read to its end is not left on the
// connection: serveBody closes it after the answer (a lingering close, so
// that a client still sending reads that answer).

// uploadBodyKey is the RequestCtx user value holding the request's
// *uploadReader.
const uploadBodyKey = "gateway.uploadBody"

var (
	errUploadTooLarge = control.Errorf(control.EPayloadTooLarge, "request body too large: at most 21 MiB")
	errUploadStalled  = control.Errorf(control.EInvalidRequest, "timed out reading the request body")
)

// uploadBody is the request's upload body (web.Host.UploadBody).
func (s *Server) uploadBody(ctx *fasthttp.RequestCtx) (io.Reader, error) {
	if r, ok := ctx.UserValue(uploadBodyKey).(*uploadReader); ok {
		return r, nil
	}
	if ctx.Request.Header.ContentLength() > s.cfg.MaxUploadBody {
		return nil, errUploadTooLarge
	}
	var body io.Reader = ctx.RequestBodyStream()
	if body == nil { // a request built in memory (tests, Handler())
		body = bytes.NewReader(ctx.Request.Body())
	}
	r := &uploadReader{r: body, left: int64(s.cfg.MaxUploadBody), idle: s.cfg.UploadIdleTimeout,
		end: time.Now().Add(s.cfg.UploadReadTimeout)}
	if c := ctx.Conn(); c != nil && ctx.Request.IsBodyStream() {
		r.conn = c
	}
	ctx.SetUserValue(uploadBodyKey, r)
	return r, nil
}

// uploadReader reads the body within the upload's limits: at most left
// bytes, each read within idle of the previous one and all by end. The
// deadline is the connection's, so it also stops a client that sends
// nothing at all.
type uploadReader struct {
	r         io.Reader
	conn      net.Conn // nil: a body in memory, no deadlines
	left      int64
	idle      time.Duration
	end       time.Time
	lastSetAt time.Time
	eof       bool // the body was read to its end
}

func (r *uploadReader) Read(p []byte) (int, error) {
	if r.conn != nil {
		// Moving the deadline costs a timer update; once per 4 KiB read
		// of a 21 MiB body is ~5,000 of them, so it moves once a
		// thirtieth of idle has passed (1 s of the default 30 s).
		if now := time.Now(); now.Sub(r.lastSetAt) >= r.idle/30 {
			r.lastSetAt = now
			d := now.Add(r.idle)
			if d.After(r.end) {
				d = r.end
			}
			if err := r.conn.SetReadDeadline(d); err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.r.Read(p)
	r.left -= int64(n)
	var ne net.Error
	switch {
	case r.left < 0:
		return n, errUploadTooLarge
	case errors.Is(err, io.EOF):
		r.eof = true
	case errors.As(err, &ne) && ne.Timeout():
		return n, errUploadStalled
	}
	return n, err
}
