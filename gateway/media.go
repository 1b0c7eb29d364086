package gateway

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

var valMediaCache = []byte("public, no-cache")

// GET /media/{name}: clone previews written by the job runner into the
// media directory (Deps.MediaDir). Public, like the sample_audio_url that
// points here: the names carry two random 96-bit ids. Only flat names of
// the shape the runner writes are served, so no path can leave the
// directory.
//
// A preview is served only while its voice exists: deleting the voice
// removes its files (removeMedia), but a clone job still running may write
// one after the delete, and another server may hold its own copy; the
// voice lookup (cached, invalidated by the delete and the change feed)
// answers 404 for all of them. Caches may keep a copy but must ask again
// (no-cache), so a delete is not hidden behind a day of max-age.
func (s *Server) media(ctx *fasthttp.RequestCtx) {
	name, _ := ctx.UserValue("name").(string)
	if s.mediaDir == "" || !validMediaName(name) {
		s.writeError(ctx, errNotFound)
		return
	}
	f, err := os.Open(filepath.Join(s.mediaDir, name))
	if err != nil {
		s.writeError(ctx, errNotFound)
		return
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		s.writeError(ctx, errNotFound)
		return
	}
	// Looked up after the file is found, so that guessed names cost no
	// store query.
	if _, err := s.core.Voices().Get(s.store, name[:mediaIDLen]); err != nil {
		f.Close()
		if control.IsCode(err, control.ENotFound) {
			err = errNotFound
		}
		s.writeError(ctx, err)
		return
	}
	ctx.Response.Header.SetContentType("audio/wav")
	ctx.Response.Header.SetCanonical(hdrCacheControl, valMediaCache)
	ctx.Response.Header.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyStream(f, int(st.Size())) // fasthttp closes f
}

const mediaIDLen = 24

// validMediaName: "<voice id>-<run id>.wav", lower-case hex ids.
func validMediaName(name string) bool {
	const idLen = mediaIDLen
	if len(name) != 2*idLen+1+4 || name[idLen] != '-' || name[2*idLen+1:] != ".wav" {
		return false
	}
	return control.ValidID(name[:idLen]) && control.ValidID(name[idLen+1:2*idLen+1])
}

// removeMedia deletes every file of voice id in the media directory (its
// previews, and a temporary file a running job may be writing). The voice
// is already gone from the store, so a file that cannot be removed is no
// longer served anyway; it is logged.
func (s *Server) removeMedia(id string) {
	if s.mediaDir == "" || !control.ValidID(id) {
		return
	}
	files, _ := filepath.Glob(filepath.Join(s.mediaDir, id+"-*")) // ids are hex: no glob syntax
	for _, f := range files {
		if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
			s.log.Warn("voice deleted but its media file stays", "file", filepath.Base(f), "err", err)
		}
	}
}
