package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"strconv"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/synth"
	"voicesvc/web"
)

// stream_format "sse" on the compatible endpoint (docs/api.md#compatible-speech):
// the bytes of the response_format, exactly those a plain answer would carry,
// cut into pieces and sent base64-encoded as
//
//	data: {"type":"speech.audio.delta","audio":"<base64>"}
//
// events, then one
//
//	data: {"type":"speech.audio.done","usage":{"input_tokens":N,"output_tokens":0,"total_tokens":N}}
//
// with N the input's characters (code points, what was metered). The events
// have no "event:" line: the third-party clients read data lines only. A
// failure before the first event is a JSON error with its status; after it,
// the body is cut short (no done event), like a plain streamed answer.
//
// Without the plan's streaming feature the clip is synthesized whole first
// (a wav then carries its true sizes) and the events go out in one body.

// deltaBytes sizes the delta events of formats with no fixed sample
// width (mp3, Ogg Opus, FLAC): 1 KiB is 128 ms of 64 kbit/s Opus or MP3 and
// about 40 ms of 24 kHz FLAC, in the range of the raw formats' 40 ms
// events. The first piece always leaves at once (synth.Coalescer).
const deltaBytes = 1024

var (
	contentTypeSSE    = []byte("text/event-stream")
	hdrCacheControl   = []byte("Cache-Control")
	hdrAccelBuffering = []byte("X-Accel-Buffering")
	valNoCache        = []byte("no-cache")
	valNo             = []byte("no")
	sseDeltaStart     = []byte(`data: {"type":"speech.audio.delta","audio":"`)
	sseDeltaEnd       = []byte("\"}\n\n")
)

// speechSSE answers an admitted compat synthesis as delta events, streamed
// or (buffered) whole.
func (o *Protocol) speechSSE(ctx *fasthttp.RequestCtx, job *web.Job, buffered bool) {
	chars := job.Options.Chars()
	size, width := o.deltaSize(job.Pipe)
	if buffered {
		o.h.Buffered(ctx, job, o.series, func(ctx *fasthttp.RequestCtx, _ *codec.Pipeline) {
			var events bytes.Buffer
			w := newDeltaWriter(&events, nil, size, width)
			// Fed in pieces of size: the first write would pass whole.
			// Writes to a bytes.Buffer do not fail.
			for body := ctx.Response.Body(); len(body) > 0; {
				n := min(size, len(body))
				_ = w.Audio(body[:n])
				body = body[n:]
			}
			_ = w.Done(chars)
			ctx.Response.SetBodyRaw(events.Bytes())
			setSSEHeaders(ctx)
		})
		return
	}
	o.h.Stream(ctx, job, o.series, func(rctx context.Context, st web.Stream) (synth.Result, error) {
		w := newDeltaWriter(st, st.Flush, size, width)
		res, err := job.Run(rctx, w.Audio)
		if err != nil {
			return res, err // after the first event: aborts the body
		}
		return res, w.Done(chars)
	}, setSSEHeaders)
}

// deltaSize is the bytes per delta event and the unit they are cut
// in: whole samples of the raw formats (wav's 44-byte header is a whole
// number of them), bytes of the others.
func (o *Protocol) deltaSize(p *codec.Pipeline) (size, width int) {
	width = p.Format().BytesPerSample()
	if p.Format() == codec.WAV {
		width = 2
	}
	if width == 0 {
		return deltaBytes, 1
	}
	chunk := o.cfg.SSEChunk
	if chunk <= 0 {
		chunk = synth.DefaultCoalesce
	}
	return synth.CoalesceBytes(p.Rate(), width, chunk), width
}

func setSSEHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentTypeBytes(contentTypeSSE)
	h.SetCanonical(hdrCacheControl, valNoCache)
	h.SetCanonical(hdrAccelBuffering, valNo)
}

// deltaWriter writes audio bytes as delta events to w, calling flush (if
// any) after each, and the done event at the end. Not safe for concurrent
// use.
type deltaWriter struct {
	w     io.Writer
	flush func() error
	co    *synth.Coalescer
	buf   []byte // the event being written, reused
	err   error  // the first failed write: the client is gone
}

func newDeltaWriter(w io.Writer, flush func() error, size, width int) *deltaWriter {
	d := &deltaWriter{w: w, flush: flush}
	d.co = synth.NewCoalescer(size, width, d.delta)
	return d
}

// Audio takes the pipeline's bytes; it has the signature of a synth.Sink.
func (d *deltaWriter) Audio(b []byte) error {
	if d.err != nil {
		return d.err
	}
	return d.co.Write(b)
}

// Done writes what audio is pending, then the done event with the usage.
func (d *deltaWriter) Done(chars int64) error {
	if err := d.co.Flush(); err != nil {
		return err
	}
	b := append(d.buf[:0], `data: {"type":"speech.audio.done","usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, chars, 10)
	b = append(b, `,"output_tokens":0,"total_tokens":`...)
	b = strconv.AppendInt(b, chars, 10)
	return d.write(append(b, "}}\n\n"...))
}

func (d *deltaWriter) delta(audio []byte) error {
	b := append(d.buf[:0], sseDeltaStart...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	return d.write(append(b, sseDeltaEnd...))
}

func (d *deltaWriter) write(b []byte) error {
	d.buf = b // keep the grown buffer for the next event
	if d.err != nil {
		return d.err
	}
	if _, err := d.w.Write(b); err != nil {
		d.err = err
		return err
	}
	if d.flush != nil {
		if err := d.flush(); err != nil {
			d.err = err
			return err
		}
	}
	return nil
}
