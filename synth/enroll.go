package synth

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/langtag"
)

// Enroll and clone uploads (docs/api.md#uploads): the admission of an
// upload, the rules of its clip, and the enrollment that stores the voice
// change, the job and the clip. The protocol receives the body (the clip
// into a temporary file) and decodes the form; the rules are here.
//
// Refusals, in this order: consent not "true" (consent_required); no file
// part, or an empty one (file_required); a file over 20 MiB
// (file_too_large); ref_text over 4,000 characters (ref_text_too_long); a
// bad language (invalid_language); for clone, name, description and labels
// as on POST /voices. A file that is plainly text, not audio, is refused
// here (invalid_request); anything else that might be audio is stored and
// the job decides: an unknown or broken container fails the job with
// unsupported_audio or corrupt_audio.

const (
	// MaxClipBytes bounds a reference clip.
	MaxClipBytes   = 20 << 20
	maxRefTextRune = 4000
	// uploadRetryAfter: uploads run for seconds to minutes, so a refused
	// one comes back later than a refused synthesis.
	uploadRetryAfter = 5
	// clipsInMemory bounds the clips read back from their files for the
	// store at once: 4 x 20 MiB, twice over with the driver's copy.
	clipsInMemory = 4
)

var (
	errUploadBusy = &control.Error{Code: control.EUpstreamBusy,
		Message: "too many uploads in progress on this server; retry later", RetryAfter: uploadRetryAfter}
	// errUploadShare: this workspace already has its share of uploads in
	// progress; the others are not held back by it.
	errUploadShare = &control.Error{Code: control.EConcurrencyLimited,
		Message: "too many uploads in progress for this workspace; retry later", RetryAfter: uploadRetryAfter}
)

// uploads is the admission of uploads: the server's slots (Deps.MaxUploads)
// and each workspace's uploads in progress, so that one workspace holds at
// most its share of them: a key that trickles a few bytes a second into
// every slot would otherwise make every other workspace's clone 503 for the
// length of an upload. An idle workspace has no entry.
type uploads struct {
	slots chan struct{}
	clips chan struct{} // one per clip read back for the store
	mu    sync.Mutex
	n     map[string]int
}

func newUploads(max int) *uploads {
	if max <= 0 {
		max = 64
	}
	return &uploads{slots: make(chan struct{}, max), clips: make(chan struct{}, clipsInMemory)}
}

// UploadShare is one workspace's share of the server's slots: a quarter,
// at least 2 (and never more than the server has).
func UploadShare(slots int) int {
	return min(slots, max(2, slots/4))
}

// AdmitUpload takes one of the server's upload slots and one of p's
// workspace's share, before the body is read: 503 upstream_busy beyond
// the server's, 429 concurrency_limited beyond the workspace's (both with
// Retry-After). release frees them, once.
func (s *Service) AdmitUpload(p *control.Principal) (release func(), err error) {
	u := s.uploads
	select {
	case u.slots <- struct{}{}:
	default:
		return nil, errUploadBusy
	}
	ws := p.WorkspaceID
	u.mu.Lock()
	if u.n[ws] >= UploadShare(cap(u.slots)) {
		u.mu.Unlock()
		<-u.slots
		return nil, errUploadShare
	}
	if u.n == nil {
		u.n = map[string]int{}
	}
	u.n[ws]++
	u.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			u.mu.Lock()
			if u.n[ws]--; u.n[ws] <= 0 {
				delete(u.n, ws)
			}
			u.mu.Unlock()
			<-u.slots
		})
	}, nil
}

// ClipFields are an upload's clip and its fields as the protocol received
// them.
type ClipFields struct {
	Consent        string
	HasFile        bool
	Size           int64
	TooLarge       bool // more than MaxClipBytes arrived
	Head           []byte
	Filename       string
	RefText        string
	RefTextTooLong bool // the field was cut off while it was read
	Language       string
}

// CheckClip applies the rules every upload shares and returns the clip,
// its Data not read yet (Enroll and Clone read it).
func (s *Service) CheckClip(f *ClipFields) (*control.Clip, error) {
	if strings.TrimSpace(f.Consent) != "true" {
		return nil, errConsent
	}
	if f.TooLarge {
		return nil, control.Errorf(control.EFileTooLarge, "file: at most 20 MiB")
	}
	if !f.HasFile || f.Size == 0 {
		return nil, control.Errorf(control.EFileRequired, "file: a reference audio clip is required")
	}
	if f.RefTextTooLong || !utf8.ValidString(f.RefText) || utf8.RuneCountInString(f.RefText) > maxRefTextRune {
		return nil, control.Errorf(control.ERefTextTooLong, "ref_text: at most %d characters", maxRefTextRune)
	}
	clip := &control.Clip{Filename: sanitizeFilename(f.Filename), RefText: f.RefText}
	if f.Language != "" {
		tag, ok := langtag.Canonical(f.Language)
		if !ok {
			return nil, control.Errorf(control.EInvalidLanguage, "language: %q is not a BCP-47 language tag", f.Language)
		}
		if err := s.CheckLanguage(tag); err != nil {
			return nil, err
		}
		clip.Language = tag
	}
	if PlainlyText(f.Head) {
		return nil, control.Errorf(control.EInvalidRequest,
			"file: this is text, not audio; upload WAV, MP3, FLAC or Ogg Opus")
	}
	return clip, nil
}

// PlainlyText: the first KiB is printable UTF-8 text. No audio container
// starts like that (WAV, FLAC, Ogg and ID3 tags have binary sizes after the
// magic, an MP3 frame starts with 0xFF), so such an upload is refused at
// the request rather than failing a job later. b is the first KiB and one
// byte more, which tells that the clip goes on.
func PlainlyText(b []byte) bool {
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
func sanitizeFilename(s string) string {
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

// Enroll moves a draft or failed voice of p's workspace to processing with
// a pending clone job, whose clip data reads back. Enrolling is free.
func (s *Service) Enroll(ctx context.Context, p *control.Principal, id string, clip *control.Clip, data func() ([]byte, error)) (*control.Voice, string, error) {
	v, err := owned(s, p, id, Resources.GetVoice, func(v *control.Voice) string { return v.OrgID })
	if err != nil {
		return nil, "", err
	}
	if clip.Language == "" {
		clip.Language = v.PrimaryLanguage
	}
	v = &control.Voice{ID: id, OrgID: p.WorkspaceID, ConsentAt: control.NowMS(), ConsentKeyID: p.KeyID}
	return s.startEnrollment(v, false, clip, data)
}

// Clone creates a voice with f (a name required, the rules of CreateVoice;
// consent was the clip's) and enrolls it in one step.
func (s *Service) Clone(ctx context.Context, p *control.Principal, f *VoiceFields, clip *control.Clip, data func() ([]byte, error)) (*control.Voice, string, error) {
	if f.Name == nil || *f.Name == "" {
		return nil, "", control.Errorf(control.EInvalidRequest, "name is required")
	}
	in, err := VoiceUpdate(f)
	if err != nil {
		return nil, "", err
	}
	v, err := s.newVoice(in, p)
	if err != nil {
		return nil, "", err
	}
	if clip.Language == "" {
		clip.Language = v.PrimaryLanguage
	}
	return s.startEnrollment(v, true, clip, data)
}

// startEnrollment reads the clip back, stores the voice change, the job
// and the clip in one transaction and wakes the job runner.
//
// The store takes the clip as one value, and its driver copies it once
// more, so a clip costs about twice its size (up to 40 MiB) while it is
// stored: a few uploads do that at once (clipsInMemory), however many are
// being received.
func (s *Service) startEnrollment(v *control.Voice, create bool, clip *control.Clip, data func() ([]byte, error)) (*control.Voice, string, error) {
	wait := time.NewTimer(resourceTimeout)
	select {
	case s.uploads.clips <- struct{}{}:
		wait.Stop()
		defer func() { <-s.uploads.clips }()
	case <-wait.C:
		return nil, "", errUploadBusy
	}
	st, c, cancel, err := s.resources()
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	if clip.Data, err = data(); err != nil {
		return nil, "", err
	}
	job := &control.Job{}
	err = st.StartEnrollment(c, v, create, job, clip)
	s.voices.Invalidate(v.ID)
	if err != nil {
		return nil, "", err
	}
	if s.jobQueued != nil {
		s.jobQueued()
	}
	return v, job.ID, nil
}

// UploadsInProgress is how many uploads hold a server slot now.
func (s *Service) UploadsInProgress() int { return len(s.uploads.slots) }
