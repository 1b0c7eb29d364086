package cartesia

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
)

// POST /tts/bytes: the audio of a transcript in one body. The order is
// speak's: rps (route wrapper) -> body (synth.ParseCartesia) -> voice,
// engine, language (core: Prepare) -> admission (slot, charge) ->
// synthesize. wav is buffered whole so that its header carries the true
// sizes; raw and mp3 stream as the engine yields them (the status is chosen
// at the first audio; a failure after it cuts the body short). Without the
// plan's streaming feature every container is buffered, as the compatible
// endpoint does.
func (c *Protocol) bytes(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, err := synth.ParseCartesia(ctx.Request.Body(), synth.CartesiaBytes)
	if err != nil {
		c.h.WriteError(ctx, err)
		return
	}
	job := c.h.Begin(ctx, p, in.Voice, in.Options, false)
	if job == nil {
		return
	}
	buffered := in.Options.Format == codec.WAV || !p.Limits.Streaming
	c.h.RespondAudio(ctx, job, c.speak, buffered, setAudioHeaders)
}

var (
	hdrSampleRate  = []byte("X-Sample-Rate")
	hdrAudioFormat = []byte("X-Audio-Format")
	hdrChannels    = []byte("X-Channels")
	valOne         = []byte("1")
)

// setAudioHeaders: the format's media type (the codec registry's:
// audio/wav, audio/mpeg, application/octet-stream for raw samples), and
// for raw samples speak's rate, format and channel headers.
func setAudioHeaders(ctx *fasthttp.RequestCtx, p *codec.Pipeline) {
	h := &ctx.Response.Header
	spec, _ := codec.LookupFormat(p.Format())
	h.SetContentType(spec.ContentType)
	if spec.Framing == codec.FramingSamples {
		var buf [8]byte
		h.SetCanonical(hdrSampleRate, strconv.AppendInt(buf[:0], int64(p.Rate()), 10))
		h.SetCanonical(hdrAudioFormat, []byte(p.Format()))
		h.SetCanonical(hdrChannels, valOne)
	}
}
