package native

import (
	"context"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/synth"
	"voicesvc/web"
)

// Synthesis over HTTP (docs/api.md#speak, #stream). The order of one
// request, every step refusing before the next costs anything:
//
//	rps (route wrapper) -> body (synth.Parse*) -> voice, engine, language
//	(core: Prepare) -> admission (core: feature, slot, charge, token) ->
//	synthesize -> finish (refund when no audio reached the client)
//
// speak answers the audio file. wav (the default) is buffered whole so that
// its header carries the true sizes and an engine failure is still a JSON
// error with a status; so is any format sent with an Idempotency-Key (the
// idempotency layer stores the body). Raw formats otherwise stream as the
// engine yields: the status is chosen at the first audio (an engine that
// fails before any audio is a JSON error), and a failure after it aborts the
// chunked body, which clients see as a truncated response, never as a
// short success.

var (
	hdrIdempotencyKey = []byte("Idempotency-Key")
	hdrSampleRate     = []byte("X-Sample-Rate")
	hdrAudioFormat    = []byte("X-Audio-Format")
	hdrChannels       = []byte("X-Channels")
	hdrCacheControl   = []byte("Cache-Control")
	hdrAccelBuffering = []byte("X-Accel-Buffering")
	valOne            = []byte("1")
	valNoCache        = []byte("no-cache")
	valNo             = []byte("no")
	contentTypeWAV    = []byte("audio/wav")
	contentTypeOctet  = []byte("application/octet-stream")
	contentTypeSSE    = []byte("text/event-stream")
)

// POST /voices/{id}/speak
func (n *Protocol) speakHandler(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, err := synth.ParseSpeak(ctx.Request.Body())
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	job := n.h.Begin(ctx, p, pathID(ctx), o, false)
	if job == nil {
		return
	}
	// A one-shot WAV carries its exact sizes, and a speak that may be
	// replayed is kept whole: both are buffered. Raw formats stream.
	buffered := o.Format == codec.WAV || len(ctx.Request.Header.PeekBytes(hdrIdempotencyKey)) > 0
	n.h.RespondAudio(ctx, job, n.speak, buffered, setAudioHeaders)
}

// setAudioHeaders: audio/wav, or raw PCM with its rate, format and channels.
func setAudioHeaders(ctx *fasthttp.RequestCtx, p *codec.Pipeline) {
	h := &ctx.Response.Header
	if p.Format() == codec.WAV {
		h.SetContentTypeBytes(contentTypeWAV)
		return
	}
	h.SetContentTypeBytes(contentTypeOctet)
	var buf [8]byte
	h.SetCanonical(hdrSampleRate, strconv.AppendInt(buf[:0], int64(p.Rate()), 10))
	h.SetCanonical(hdrAudioFormat, []byte(p.Format()))
	h.SetCanonical(hdrChannels, valOne)
}

// POST /voices/{id}/stream: server-sent events (docs/api.md#stream,
// #sse-events). The status is chosen at the first audio: a synthesis that
// fails before it answers a JSON error with a status; after it, an error
// event ends the stream. The start event goes out with the first chunk.
func (n *Protocol) stream(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, err := synth.ParseStream(ctx.Request.Body())
	if err != nil {
		n.h.WriteError(ctx, err)
		return
	}
	if job := n.h.Begin(ctx, p, pathID(ctx), o, true); job != nil {
		n.h.Stream(ctx, job, n.sse, n.runSSE(job), setSSEHeaders)
	}
}

func setSSEHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentTypeBytes(contentTypeSSE)
	h.SetCanonical(hdrCacheControl, valNoCache)
	h.SetCanonical(hdrAccelBuffering, valNo)
}

// runSSE synthesizes job as SSE events into the stream: start (queued, sent
// with the first chunk), chunks, then done or error.
func (n *Protocol) runSSE(job *web.Job) web.StreamFunc {
	chunk := n.cfg.SSEChunk
	if chunk <= 0 {
		chunk = synth.DefaultCoalesce
	}
	return func(rctx context.Context, st web.Stream) (synth.Result, error) {
		rate, f := job.Pipe.Rate(), job.Pipe.Format()
		width := f.BytesPerSample()
		w := synth.NewSSEWriter(st, st.Flush, synth.CoalesceBytes(rate, width, chunk), width)
		st.Write(synth.AppendSSEStart(nil, rate, f)) // queued: it leaves with the first chunk
		eng := job.Engine
		if job.Options.Timestamps && engine.WordTimes(eng) {
			// The pool gives word events offsets into the whole text and
			// samples into the whole stream's audio: one clock serves.
			clock := synth.NewWordClock(eng.NativeRate(), job.Request.Text)
			eng = synth.Tap(eng, func(c engine.Chunk) error {
				if words := clock.Chunk(c); len(words) > 0 {
					return w.Words(c.Sentence, words)
				}
				return nil
			})
		}
		res, err := synth.Run(rctx, eng, job.Request, job.Pipe, w.Audio)
		err = n.h.Cause(rctx, err) // the grace ended: an error event says so
		switch {
		case web.IsClientGone(err):
			return res, err
		case err != nil && !st.Sent():
			return res, err // answered as a JSON error with a status
		case err != nil:
			if werr := w.Error(err); werr != nil {
				return res, werr
			}
			st.SelfEnded()
			return res, err
		}
		if err := w.Done(res.Duration); err != nil {
			return res, err
		}
		st.SelfEnded()
		return res, nil
	}
}
