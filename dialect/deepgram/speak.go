package deepgram

import (
	"errors"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
	"voicesvc/web"
)

// POST {base}/v1/speak: the audio of the body's text, in the query's
// format (docs/dialects.md#deepgram). The order is speak's: rps (route
// wrapper) -> query and body (synth.ParseDeepgramSpeak) -> voice, engine,
// language (core: Prepare) -> admission (slot, charge) -> synthesize.
//
// Files whose header carries their size (WAV, of linear16 or of the
// telephony codecs) are buffered whole, as the native speak's WAV, and so
// is everything without the plan's streaming feature; the other formats
// stream as the engine yields. The answer carries Deepgram's headers
// (dg-model-name, dg-model-uuid, dg-char-count, dg-request-id).

var (
	hdrModelName   = []byte("dg-model-name")
	hdrModelUUID   = []byte("dg-model-uuid")
	hdrCharCount   = []byte("dg-char-count")
	hdrDGRequestID = []byte("dg-request-id")
	ctWAV          = []byte("audio/wav")
)

func (d *Protocol) speak(ctx *fasthttp.RequestCtx, p *control.Principal) {
	q := query(ctx.QueryArgs())
	in, err := synth.ParseDeepgramSpeak(&q, ctx.Request.Body())
	if err != nil {
		d.h.WriteError(ctx, err)
		return
	}
	job, err := d.h.Prepare(ctx, p, in.Model, in.Options)
	if err != nil {
		d.h.WriteError(ctx, modelError(err, in.Model))
		return
	}
	if !d.h.Admit(ctx, p, job, false) {
		return
	}
	buffered := in.Options.Format == codec.WAV || in.G711WAV || !p.Limits.Streaming
	chars := in.Options.Chars()
	d.h.RespondAudio(ctx, job, d.rest, buffered, func(ctx *fasthttp.RequestCtx, pipe *codec.Pipeline) {
		if in.G711WAV {
			// The buffered samples, behind the header of their true size.
			body := ctx.Response.Body()
			wav, _ := codec.AppendG711WAVHeader(make([]byte, 0, 44+len(body)), pipe.Format(), pipe.Rate(), len(body))
			ctx.Response.SetBodyRaw(append(wav, body...))
		}
		setHeaders(ctx, pipe, in, job.Voice, chars)
	})
}

// setHeaders describes the audio, with Deepgram's headers: the model as
// asked, the voice's id for the model's uuid, the characters metered. The
// media type is the format's (the codec registry's), audio/wav for G.711
// in a WAV file.
func setHeaders(ctx *fasthttp.RequestCtx, pipe *codec.Pipeline, in synth.DeepgramSpeech, v *control.Voice, chars int64) {
	h := &ctx.Response.Header
	if in.G711WAV {
		h.SetContentTypeBytes(ctWAV)
	} else {
		spec, _ := codec.LookupFormat(pipe.Format())
		h.SetContentType(spec.ContentType)
	}
	h.SetBytesK(hdrModelName, in.Model)
	h.SetBytesK(hdrModelUUID, v.ID)
	var buf [20]byte
	h.SetBytesKV(hdrCharCount, strconv.AppendInt(buf[:0], chars, 10))
	h.SetBytesKV(hdrDGRequestID, web.RequestID(ctx))
}

// modelError is a voice lookup's refusal as Deepgram's clients expect it:
// a model that names no voice the workspace can use is a bad query
// parameter (400), not a missing resource.
func modelError(err error, model string) error {
	if e := (*control.Error)(nil); errors.As(err, &e) && e.Code == control.ENotFound {
		ne := control.Errorf(control.EInvalidRequest, "model %q is not a voice of this workspace: give a voice id, or make the name a workspace alias of a voice", model)
		ne.Param = "model"
		return ne
	}
	return err
}

// query reads the speak parameters from args; a parameter given twice
// counts once (its first value).
func query(args *fasthttp.Args) synth.DeepgramQuery {
	get := func(k string) []byte {
		if !args.Has(k) {
			return nil
		}
		return append([]byte{}, args.Peek(k)...)
	}
	return synth.DeepgramQuery{
		Model: get("model"), Encoding: get("encoding"), Container: get("container"),
		SampleRate: get("sample_rate"), BitRate: get("bit_rate"), Speed: get("speed"),
		Callback: get("callback"),
	}
}
