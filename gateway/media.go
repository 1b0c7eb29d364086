package gateway

import (
	"os"
	"path/filepath"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// GET /media/{name}: clone previews written by the job runner into the
// media directory (Deps.MediaDir). Public, like the sample_audio_url that
// points here: the names carry two random 96-bit ids. Only flat names of
// the shape the runner writes are served, so no path can leave the
// directory.
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
	ctx.Response.Header.SetContentType("audio/wav")
	ctx.Response.Header.Set("Cache-Control", "public, max-age=86400")
	ctx.Response.Header.Set("Content-Length", strconv.FormatInt(st.Size(), 10))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyStream(f, int(st.Size())) // fasthttp closes f
}

// validMediaName: "<voice id>-<job id>.wav", lower-case hex ids.
func validMediaName(name string) bool {
	const idLen = 24
	if len(name) != 2*idLen+1+4 || name[idLen] != '-' || name[2*idLen+1:] != ".wav" {
		return false
	}
	return control.ValidID(name[:idLen]) && control.ValidID(name[idLen+1:2*idLen+1])
}
