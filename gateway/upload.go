package gateway

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"os"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Receiving an enroll or clone upload. The server streams upload bodies
// (fasthttp's StreamRequestBody): a Content-Length reserves nothing, the
// route wrapper has authenticated the caller before the first byte of the
// body is read here, and a connection holds a few buffers (the multipart
// reader's 4 KiB, a 32 KiB copy buffer, form fields up to 64 KiB) whatever
// it declares. The clip goes to a temporary file, unlinked as soon as it is
// made, so that it disappears with its descriptor on every path, a crash
// included. In order, receiving refuses:
//
//   - a declared Content-Length over MaxUploadBody (413), before reading;
//   - a body that is not multipart/form-data (400), before reading;
//   - a request beyond MaxUploads receiving at once (503 upstream_busy,
//     Retry-After), before reading;
//   - a request beyond its workspace's share of MaxUploads (uploadShare:
//     a quarter, at least 2; 429 concurrency_limited, Retry-After), before
//     reading;
//   - a body that grows past MaxUploadBody while it arrives, chunked or
//     not (413); one that stops arriving for UploadIdleTimeout, or is not
//     complete after UploadReadTimeout (400); a malformed one (400).
//
// Whatever the answer, a body not read to its end is not left on the
// connection: serveHTTP closes it after the answer (a lingering close, so
// that a client still sending reads that answer).

// uploadKey is the RequestCtx user value holding the request's *upload.
const uploadKey = "gateway.upload"

// uploadRetryAfter: uploads run for seconds to minutes, so a refused one
// comes back later than a refused synthesis.
const uploadRetryAfter = 5

var (
	errUploadBusy = &control.Error{Code: control.EUpstreamBusy,
		Message: "too many uploads in progress on this server; retry later", RetryAfter: uploadRetryAfter}
	errUploadTooLarge = control.Errorf(control.EPayloadTooLarge, "request body too large: at most 21 MiB")
	errUploadStalled  = control.Errorf(control.EInvalidRequest, "timed out reading the request body")
	errNotMultipart   = control.Errorf(control.EInvalidRequest, "the body must be multipart/form-data")
)

// upload is one request's upload: its slot among MaxUploads, the clip's
// temporary file and the parsed form. close releases both, once.
type upload struct {
	s       *Server
	form    *uploadForm
	err     error
	slot    bool
	ws      string // the workspace whose share the upload counts in; "": none
	file    *os.File
	bodyEOF bool // the body was read to its end
	once    sync.Once
}

// receiveUpload reads the request's upload once; later calls in the same
// request (the idempotency wrapper, then the handler) get the same result.
// serveHTTP releases it after the handler.
func (s *Server) receiveUpload(ctx *fasthttp.RequestCtx, p *control.Principal) (*uploadForm, error) {
	if u, ok := ctx.UserValue(uploadKey).(*upload); ok {
		return u.form, u.err
	}
	u := &upload{s: s}
	ctx.SetUserValue(uploadKey, u) // released by serveHTTP, or Close at the request's reset
	u.form, u.err = s.receive(ctx, u, p)
	if u.err != nil {
		u.form = nil
	}
	return u.form, u.err
}

// Close releases the upload's slot and temporary file; fasthttp also calls
// it when the request's user values are reset.
func (u *upload) Close() error {
	u.once.Do(func() {
		if u.file != nil {
			u.file.Close()
		}
		if u.slot {
			<-u.s.uploads
		}
		if u.ws != "" {
			u.s.uploadShares.give(u.ws)
		}
	})
	return nil
}

func (s *Server) receive(ctx *fasthttp.RequestCtx, u *upload, p *control.Principal) (*uploadForm, error) {
	if ctx.Request.Header.ContentLength() > s.cfg.MaxUploadBody {
		return nil, errUploadTooLarge
	}
	mt, params, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errNotMultipart
	}
	select {
	case s.uploads <- struct{}{}:
		u.slot = true
	default:
		return nil, errUploadBusy
	}
	if p != nil {
		if !s.uploadShares.take(p.WorkspaceID, uploadShare(cap(s.uploads))) {
			return nil, errUploadShare // Close frees the server's slot
		}
		u.ws = p.WorkspaceID
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
	f, err := parseUpload(r, params["boundary"], func() (*os.File, error) { return u.tempFile(s.cfg.UploadDir) })
	if err == nil {
		// The epilogue after the last boundary, if any, so that the
		// connection is left at the next request.
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		return nil, uploadError(err)
	}
	u.bodyEOF = true
	return f, nil
}

// tempFile makes the clip's file in dir and unlinks it at once: it lives as
// long as the descriptor, which close releases.
func (u *upload) tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "voicesvc-upload-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	u.file = f
	return f, nil
}

// uploadError turns a failed read of the body into its answer.
func uploadError(err error) error {
	var ce *control.Error
	var ne net.Error
	switch {
	case errors.Is(err, errBodyOverLimit):
		return errUploadTooLarge
	case errors.Is(err, errPartHeaders):
		return control.Errorf(control.EInvalidRequest, "malformed multipart body: %v", errPartHeaders)
	case errors.As(err, &ne) && ne.Timeout():
		return errUploadStalled
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, errTempFile):
		return control.Errorf(control.EInternal, "%v", err)
	}
	return control.Errorf(control.EInvalidRequest, "malformed multipart body: %v", err)
}

// maxPartHeaderBytes bounds what the multipart reader may read while it
// looks for the next part and reads its headers (its own bound is 10 MiB,
// all of it held in memory); a part's headers are a few hundred bytes.
const maxPartHeaderBytes = 64 << 10

var (
	errBodyOverLimit = errors.New("request body over the limit")
	errPartHeaders   = errors.New("part headers too large")
	errTempFile      = errors.New("upload temporary file")
)

// uploadReader reads the body within the upload's limits: at most left
// bytes, each read within idle of the previous one and all by end. The
// deadline is the connection's, so it also stops a client that sends
// nothing at all.
type uploadReader struct {
	r    io.Reader
	conn net.Conn // nil: a body in memory, no deadlines
	left int64
	// headerLeft, when inHeader, is what the multipart reader may still
	// read before the next part's content starts (parseUpload).
	inHeader   bool
	headerLeft int64
	idle       time.Duration
	end        time.Time
	lastSetAt  time.Time
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
	if r.left < 0 {
		return n, errBodyOverLimit
	}
	if r.inHeader {
		if r.headerLeft -= int64(n); r.headerLeft < 0 {
			return n, errPartHeaders
		}
	}
	return n, err
}

// parseUpload reads a multipart form part by part: the file part into the
// file newFile makes (at most maxClipBytes are kept; a larger one is
// flagged and the rest read and dropped), other fields into memory (at
// most maxFieldBytes each). It also hashes every part as the idempotency
// fingerprint does (idempotency.go), so that a retry matches whatever
// boundary it picked.
func parseUpload(body *uploadReader, boundary string, newFile func() (*os.File, error)) (*uploadForm, error) {
	f := &uploadForm{}
	fp := sha256.New()
	r := multipart.NewReader(body, boundary)
	buf := make([]byte, 32<<10)
	for {
		// The previous part was read to its end, so what NextPart reads
		// is a boundary line and headers (and the 4 KiB its reader reads
		// ahead).
		body.inHeader, body.headerLeft = true, maxPartHeaderBytes
		part, err := r.NextPart()
		body.inHeader = false
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		writePartHeader(fp, part)
		sum := sha256.New()
		content := io.TeeReader(part, sum)
		name := part.FormName()
		if name == "file" {
			if f.hasFile {
				return nil, control.Errorf(control.EInvalidRequest, "file: send one file")
			}
			f.hasFile = true
			f.filename = []byte(part.FileName())
			if err := f.receiveFile(content, newFile, buf); err != nil {
				return nil, err
			}
		} else if err := f.receiveField(name, content); err != nil {
			return nil, err
		}
		// What a refused field or an oversized file left unread still
		// counts in the fingerprint.
		if _, err := io.CopyBuffer(io.Discard, content, buf); err != nil {
			return nil, err
		}
		fp.Write(sum.Sum(nil))
	}
	f.partsHash = fp.Sum(nil)
	return f, nil
}

// receiveFile copies the clip into a new temporary file.
func (f *uploadForm) receiveFile(content io.Reader, newFile func() (*os.File, error), buf []byte) error {
	file, err := newFile()
	if err != nil {
		return errors.Join(errTempFile, err)
	}
	n, err := io.CopyBuffer(onlyWriter{file}, io.LimitReader(content, maxClipBytes+1), buf)
	if errors.Is(err, errBodyOverLimit) || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return errors.Join(errTempFile, err)
	}
	if err != nil {
		return err
	}
	if n > maxClipBytes {
		f.fileTooLarge = true
		return nil
	}
	f.clip, f.clipSize = file, n
	return nil
}

// onlyWriter hides *os.File's ReadFrom, which would bypass the copy buffer
// and the limit's accounting of a failed write.
type onlyWriter struct{ io.Writer }

// receiveField keeps a known form field; unknown fields are dropped.
func (f *uploadForm) receiveField(name string, content io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(content, maxFieldBytes+1))
	if err != nil {
		return err
	}
	if len(b) > maxFieldBytes {
		if name == "ref_text" {
			f.refTextTooLong = true
			return nil
		}
		return control.Errorf(control.EInvalidRequest, "%s: too long", name)
	}
	v := string(b)
	switch name {
	case "consent":
		f.consent = v
	case "language":
		f.language = v
	case "ref_text":
		f.refText = v
	case "name":
		f.name = v
	case "description":
		f.description = &v
	case "labels":
		f.labels = &v
	}
	return nil
}

// writePartHeader writes what identifies a part besides its content: form
// name, file name and content type, each ended by a NUL.
func writePartHeader(h io.Writer, part *multipart.Part) {
	for _, s := range []string{part.FormName(), part.FileName(), part.Header.Get("Content-Type")} {
		io.WriteString(h, s)
		h.Write([]byte{0})
	}
}

// clipHead is the start of the clip for plainlyText: its first KiB and one
// byte more, which tells it that the clip goes on.
func (f *uploadForm) clipHead() []byte {
	b := make([]byte, min(f.clipSize, 1025))
	n, _ := f.clip.ReadAt(b, 0)
	return b[:n]
}

// clipData reads the whole clip back from its file: the store keeps it as
// one value.
func (f *uploadForm) clipData() ([]byte, error) {
	b := make([]byte, f.clipSize)
	if _, err := f.clip.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, control.Errorf(control.EInternal, "reading the upload back: %v", err)
	}
	return b, nil
}
