package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/synth"
	"voicesvc/telemetry"
	"voicesvc/web"
)

// Audio answers, the protocols' (web.Host.RespondAudio, Buffered, Stream):
// a buffered body here, a streamed one in stream.go.

// synthTimeout bounds a buffered synthesis, which cannot notice a client
// that left: 10,000 characters take far less.
const synthTimeout = 10 * time.Minute

// bufferedAudio synthesizes into the response body, then fixes the WAV
// header's sizes and calls setHeaders.
func (s *Server) bufferedAudio(ctx *fasthttp.RequestCtx, job *web.Job, series *telemetry.Series,
	setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline)) {
	// Cancelled like a stream when a shutdown's grace ends (drain.go).
	rctx, cancel := context.WithTimeout(s.drain.streamContext(), synthTimeout)
	var sink synth.Sink = func(b []byte) error {
		ctx.Response.AppendBody(b)
		return nil
	}
	var first *firstChunk // when traced: the engine's start and first audio
	if s.tracer != nil {
		first, sink = timeFirstChunk(sink)
	}
	// A client that leaves while its clip is built stops the synthesis:
	// nothing would read the body, and the slot would be held until the
	// engine gave up (a dripping upstream held one for minutes).
	watch := watchHangup(ctx.Conn(), cancel)
	res, err := job.Run(rctx, sink)
	watch.stop()
	err = s.drain.cause(rctx, err)
	cancel()
	delivered := res.Samples
	if err != nil {
		delivered = 0 // the body is dropped: the client gets an error, no audio
	}
	job.Finish(delivered)
	s.outcome(series, err)
	s.synthEnded(job, series, first, err)
	if err != nil {
		ctx.Response.ResetBody()
		s.synthFailed(ctx, err)
		return
	}
	if job.Options.Format == codec.WAV {
		if body := ctx.Response.Body(); len(body) >= 44 {
			codec.AppendWAVHeader(body[:0], job.Pipe.Rate(), 16, false, len(body)-44)
		}
	}
	setHeaders(ctx, job.Pipe) // last: it may rewrap the finished body (compat SSE)
}

// synthFailed answers a synthesis that failed before any audio: it was
// refunded, so the balance header of the admission no longer holds.
func (s *Server) synthFailed(ctx *fasthttp.RequestCtx, err error) {
	ctx.Response.Header.DelBytes(hdrBillingRemain)
	s.writeError(ctx, err)
}
