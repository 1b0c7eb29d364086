package native

import (
	"crypto/sha256"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"os"
	"sync"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/synth"
)

// Receiving an enroll or clone upload (docs/api.md#uploads). The host
// hands the body as it arrives (web.Host.UploadBody: its size and time
// limits, and a Content-Length that reserves nothing); the clip goes to a
// temporary file, unlinked as soon as it is made, so that it disappears
// with its descriptor on every path, a crash included. A connection holds
// a few buffers (the multipart reader's 4 KiB, a 32 KiB copy buffer, form
// fields up to 64 KiB) whatever it declares. In order, receiving refuses:
//
//   - a declared Content-Length over the upload limit (413), before reading;
//   - a body that is not multipart/form-data (400), before reading;
//   - an upload the core does not admit (AdmitUpload: the server's slots,
//     503; the workspace's share, 429), before reading;
//   - a body over the limit, stalled or malformed (the host's 413 and 400,
//     or 400 here).

// uploadKey is the RequestCtx user value holding the request's *upload.
const uploadKey = "native.upload"

const (
	// maxFieldBytes bounds a non-file form field; the longest legitimate
	// one is ref_text (4,000 characters, at most 16 KB of UTF-8).
	maxFieldBytes = 64 << 10
	// maxPartHeaderBytes bounds what the multipart reader may read while
	// it looks for the next part and reads its headers (its own bound is
	// 10 MiB, all of it held in memory); a part's headers are a few
	// hundred bytes.
	maxPartHeaderBytes = 64 << 10
)

var (
	errNotMultipart = control.Errorf(control.EInvalidRequest, "the body must be multipart/form-data")
	errPartHeaders  = errors.New("part headers too large")
	errTempFile     = errors.New("upload temporary file")
)

// uploadForm is a parsed enroll or clone form.
type uploadForm struct {
	clip                    *os.File // the file part, in an unlinked temporary file
	clipSize                int64
	filename                []byte
	hasFile                 bool
	fileTooLarge            bool // reported after consent and presence
	refTextTooLong          bool
	consent                 string
	language, refText, name string
	description, labels     *string
	partsHash               []byte // SHA-256 of the parts, for Idempotency-Key
}

// upload is one request's upload: its admission and the clip's temporary
// file. Close releases both, once; fasthttp calls it when the request's
// user values are reset.
type upload struct {
	form    *uploadForm
	err     error
	release func()
	file    *os.File
	once    sync.Once
}

func (u *upload) Close() error {
	u.once.Do(func() {
		if u.file != nil {
			u.file.Close()
		}
		if u.release != nil {
			u.release()
		}
	})
	return nil
}

// receiveUpload reads the request's upload once; later calls in the same
// request (the idempotency fingerprint, then the handler) get the same
// result.
func (n *Protocol) receiveUpload(ctx *fasthttp.RequestCtx, p *control.Principal) (*uploadForm, error) {
	if u, ok := ctx.UserValue(uploadKey).(*upload); ok {
		return u.form, u.err
	}
	u := &upload{}
	ctx.SetUserValue(uploadKey, u)
	u.form, u.err = n.receive(ctx, u, p)
	if u.err != nil {
		u.form = nil
	}
	return u.form, u.err
}

// uploadFingerprint is the idempotency fingerprint of an upload: its parts
// hashed one by one, so that a retry matches whatever boundary it picked.
func (n *Protocol) uploadFingerprint(ctx *fasthttp.RequestCtx, p *control.Principal) ([]byte, error) {
	f, err := n.receiveUpload(ctx, p)
	if err != nil {
		return nil, err
	}
	return f.partsHash, nil
}

func (n *Protocol) receive(ctx *fasthttp.RequestCtx, u *upload, p *control.Principal) (*uploadForm, error) {
	body, err := n.h.UploadBody(ctx)
	if err != nil {
		return nil, err
	}
	mt, params, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || mt != "multipart/form-data" || params["boundary"] == "" {
		return nil, errNotMultipart
	}
	if u.release, err = n.h.Core().AdmitUpload(p); err != nil {
		return nil, err
	}
	r := &partsReader{r: body}
	f, err := parseUpload(r, params["boundary"], func() (*os.File, error) { return u.tempFile(n.cfg.UploadDir) })
	if err == nil {
		// The epilogue after the last boundary, if any, so that the
		// connection is left at the next request.
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		return nil, uploadError(err)
	}
	return f, nil
}

// tempFile makes the clip's file in dir and unlinks it at once: it lives as
// long as the descriptor, which Close releases.
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
	switch {
	case errors.Is(err, errPartHeaders):
		return control.Errorf(control.EInvalidRequest, "malformed multipart body: %v", errPartHeaders)
	case errors.As(err, &ce):
		return ce
	case errors.Is(err, errTempFile):
		return control.Errorf(control.EInternal, "%v", err)
	}
	return control.Errorf(control.EInvalidRequest, "malformed multipart body: %v", err)
}

// partsReader reads the body for the multipart reader; while inHeader,
// headerLeft is what it may still read before the next part's content
// starts (parseUpload).
type partsReader struct {
	r          io.Reader
	inHeader   bool
	headerLeft int64
}

func (r *partsReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if r.inHeader {
		if r.headerLeft -= int64(n); r.headerLeft < 0 {
			return n, errPartHeaders
		}
	}
	return n, err
}

// parseUpload reads a multipart form part by part: the file part into the
// file newFile makes (at most synth.MaxClipBytes are kept; a larger one is
// flagged and the rest read and dropped), other fields into memory (at
// most maxFieldBytes each). It also hashes every part (uploadFingerprint).
func parseUpload(body *partsReader, boundary string, newFile func() (*os.File, error)) (*uploadForm, error) {
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
	n, err := io.CopyBuffer(onlyWriter{file}, io.LimitReader(content, synth.MaxClipBytes+1), buf)
	var ce *control.Error
	if errors.As(err, &ce) || errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return errors.Join(errTempFile, err)
	}
	if err != nil {
		return err
	}
	if n > synth.MaxClipBytes {
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

// clipHead is the start of the clip for synth.PlainlyText: its first KiB
// and one byte more, which tells it that the clip goes on.
func (f *uploadForm) clipHead() []byte {
	if f.clip == nil {
		return nil
	}
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
