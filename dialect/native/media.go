package native

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

var valMediaCache = []byte("public, no-cache")

// GET /media/{name} (at the host's root): clone previews written by the
// job runner. Public, like the sample_audio_url that points here: the
// names carry two random 96-bit ids. The core finds the file only while
// its voice exists (synth.Service.Media); caches may keep a copy but must
// ask again (no-cache), so a delete is not hidden behind a day of max-age.
func (n *Protocol) registerMedia(h web.Host) {
	h.Handle(web.Route{Method: "GET", Path: "/media/{name}", Root: true, CORS: true}, n.media)
}

func (n *Protocol) media(ctx *fasthttp.RequestCtx, _ *control.Principal) {
	name, _ := ctx.UserValue("name").(string)
	f, size, err := n.h.Core().Media(name)
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	ctx.Response.Header.SetContentType("audio/wav")
	ctx.Response.Header.SetCanonical(hdrCacheControl, valMediaCache)
	ctx.Response.Header.Set("Content-Length", strconv.FormatInt(size, 10))
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyStream(f, int(size)) // fasthttp closes f
}
