package cartesia

import (
	"context"
	"errors"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/synth"
	"voicesvc/web"
)

// POST /tts/sse: the audio of a transcript as server-sent events (raw
// encodings only, as Cartesia's): chunk events of base64 audio,
// timestamps events when add_timestamps is set, then done; each event is
// `event: <type>` and `data: <the event object>` (events.go). The status is
// chosen at the first audio: a synthesis that fails before it answers
// Cartesia's HTTP error object with a status; after it, an error event ends
// the stream. Like the native SSE it needs the plan's streaming feature.
func (c *Protocol) sseHandler(ctx *fasthttp.RequestCtx, p *control.Principal) {
	in, err := synth.ParseCartesia(ctx.Request.Body(), synth.CartesiaSSE)
	if err != nil {
		c.h.WriteError(ctx, err)
		return
	}
	job := c.h.Begin(ctx, p, in.Voice, in.Options, true)
	if job == nil {
		return
	}
	requestID := string(web.RequestID(ctx))
	c.h.Stream(ctx, job, c.sse, c.runSSE(job, in.ContextID, requestID), setSSEHeaders)
}

var (
	contentTypeSSE    = []byte("text/event-stream")
	hdrCacheControl   = []byte("Cache-Control")
	hdrAccelBuffering = []byte("X-Accel-Buffering")
	valNoCache        = []byte("no-cache")
	valNo             = []byte("no")
)

func setSSEHeaders(ctx *fasthttp.RequestCtx) {
	h := &ctx.Response.Header
	h.SetContentTypeBytes(contentTypeSSE)
	h.SetCanonical(hdrCacheControl, valNoCache)
	h.SetCanonical(hdrAccelBuffering, valNo)
}

// runSSE synthesizes job as Cartesia events into the stream.
func (c *Protocol) runSSE(job *web.Job, contextID, requestID string) web.StreamFunc {
	chunk := c.cfg.SSEChunk
	if chunk <= 0 {
		chunk = synth.DefaultCoalesce
	}
	return func(rctx context.Context, st web.Stream) (synth.Result, error) {
		rate, width := job.Pipe.Rate(), job.Pipe.Format().BytesPerSample()
		w := &sseWriter{st: st, contextID: contextID, last: time.Now()}
		co := synth.NewCoalescer(synth.CoalesceBytes(rate, width, chunk), width, w.chunk)
		eng := job.Engine
		if job.Options.Timestamps && engine.WordTimes(eng) {
			// Word events carry offsets into the whole transcript and
			// samples into the whole stream's audio: one clock serves.
			clock := synth.NewWordClock(eng.NativeRate(), job.Request.Text)
			eng = synth.Tap(eng, func(ch engine.Chunk) error {
				if words := clock.Chunk(ch); len(words) > 0 {
					// Audio before the words' first goes first, so the
					// words precede the audio that holds them.
					if err := co.Flush(); err != nil {
						return err
					}
					return w.event("timestamps", appendTimestamps(w.buf[:0], contextID, words))
				}
				return nil
			})
		}
		res, err := synth.Run(rctx, eng, job.Request, job.Pipe, co.Write)
		if err == nil {
			err = co.Flush()
		}
		err = c.h.Cause(rctx, err) // the grace ended: an error event says so
		switch {
		case web.IsClientGone(err):
			return res, err
		case err != nil && !st.Sent():
			return res, err // answered as Cartesia's error object with a status
		case err != nil:
			if werr := w.event("error", appendErrorEvent(w.buf[:0], contextID, asControl(err), requestID)); werr != nil {
				return res, werr
			}
			st.SelfEnded()
			return res, err
		}
		if err := w.event("done", appendDone(w.buf[:0], contextID)); err != nil {
			return res, err
		}
		st.SelfEnded()
		return res, nil
	}
}

// asControl is err as the client may see it: a *control.Error as it is,
// anything else internal (its detail stays in the server's log).
func asControl(err error) *control.Error {
	var e *control.Error
	if errors.As(err, &e) {
		return e
	}
	return control.Errorf(control.EInternal, "synthesis failed")
}

// sseWriter writes events to the stream, each flushed at once. Not safe
// for concurrent use.
type sseWriter struct {
	st        web.Stream
	contextID string
	buf       []byte    // the event object being written, reused
	line      []byte    // the SSE lines around it, reused
	last      time.Time // when the previous chunk left: step_time
}

// chunk writes a chunk event of audio (a Coalescer's emit).
func (w *sseWriter) chunk(audio []byte) error {
	now := time.Now()
	step := float64(now.Sub(w.last)) / float64(time.Millisecond)
	w.last = now
	w.buf = appendChunk(w.buf[:0], w.contextID, audio, step)
	return w.event("chunk", w.buf)
}

// event writes `event: name` and `data: obj`, then flushes.
func (w *sseWriter) event(name string, obj []byte) error {
	w.buf = obj[:0] // keep the grown buffer
	b := append(w.line[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, obj...)
	b = append(b, "\n\n"...)
	w.line = b
	if _, err := w.st.Write(b); err != nil {
		return err
	}
	return w.st.Flush()
}
