package gateway

import (
	"os"
	"strings"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/langtag"
)

// Enroll and clone uploads (docs/api.md). The body is received by receiveUpload (upload.go): streamed, the clip to
// a temporary file, within the limits of the upload routes.
//
// Refusals, in this order: a body that is not multipart/form-data
// (invalid_request); consent not "true" (consent_required); no file part,
// or an empty one (file_required); a file over 20 MiB (file_too_large);
// ref_text over 4,000 characters (ref_text_too_long); a bad language
// (invalid_language); for clone, name, description and labels as on POST
// /voices. A file that is plainly text, not audio, is refused here
// (invalid_request); anything else that might be audio is stored and the
// job decides: an unknown or broken container fails the job with
// unsupported_audio or corrupt_audio.

const (
	maxClipBytes   = 20 << 20
	maxRefTextRune = 4000
	// maxFieldBytes bounds a non-file form field; the longest legitimate
	// one is ref_text (4,000 characters, at most 16 KB of UTF-8).
	maxFieldBytes = 64 << 10
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

// checkUpload applies the rules every upload shares and returns the clip,
// its Data not read yet (startEnrollment reads it).
func (s *Server) checkUpload(f *uploadForm) (*control.Clip, error) {
	if strings.TrimSpace(f.consent) != "true" {
		return nil, control.Errorf(control.EConsentRequired,
			"consent must be true: the caller is the speaker or holds their explicit permission")
	}
	if f.fileTooLarge {
		return nil, control.Errorf(control.EFileTooLarge, "file: at most 20 MiB")
	}
	if !f.hasFile || f.clipSize == 0 {
		return nil, control.Errorf(control.EFileRequired, "file: a reference audio clip is required")
	}
	if f.refTextTooLong || !utf8.ValidString(f.refText) || utf8.RuneCountInString(f.refText) > maxRefTextRune {
		return nil, control.Errorf(control.ERefTextTooLong, "ref_text: at most %d characters", maxRefTextRune)
	}
	clip := &control.Clip{Filename: sanitizeFilename(f.filename), RefText: f.refText}
	if f.language != "" {
		tag, ok := langtag.Canonical(f.language)
		if !ok {
			return nil, control.Errorf(control.EInvalidLanguage, "language: %q is not a BCP-47 language tag", f.language)
		}
		if err := s.checkLanguage(tag); err != nil {
			return nil, err
		}
		clip.Language = tag
	}
	if plainlyText(f.clipHead()) {
		return nil, control.Errorf(control.EInvalidRequest,
			"file: this is text, not audio; upload WAV, MP3, FLAC or Ogg Opus")
	}
	return clip, nil
}

// plainlyText: the first KiB is printable UTF-8 text. No audio container
// starts like that (WAV, FLAC, Ogg and ID3 tags have binary sizes after the
// magic, an MP3 frame starts with 0xFF), so such an upload is refused at
// the request rather than failing a job later.
func plainlyText(b []byte) bool {
	head := b[:min(len(b), 1024)]
	for len(head) > 0 {
		r, n := utf8.DecodeRune(head)
		if r == utf8.RuneError && n <= 1 {
			// A character cut at the 1 KiB boundary is still text.
			return len(head) < utf8.UTFMax && len(b) > 1024
		}
		if r < 0x20 && r != '\n' && r != '\r' && r != '\t' || r == 0x7f {
			return false
		}
		head = head[n:]
	}
	return true
}

// sanitizeFilename keeps a client's file name for the record only: base
// name, printable, bounded.
func sanitizeFilename(b []byte) string {
	s := string(b)
	if i := strings.LastIndexAny(s, `/\`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > 255 {
		s = string([]rune(s)[:255])
	}
	return s
}

// enrollData is the 202 payload: {"voice": ..., "job_id": ...}.
type enrollData struct {
	voice *control.Voice
	jobID string
}

func (d *enrollData) appendJSON(b []byte) []byte {
	b = append(b, `{"voice":`...)
	b = appendVoice(b, d.voice, nil)
	b = append(b, `,"job_id":`...)
	b = appendString(b, d.jobID)
	return append(b, '}')
}
