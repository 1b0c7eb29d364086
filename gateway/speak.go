package gateway

import (
	"context"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/synth"
)

// Synthesis over HTTP (docs/api.md#speak, #stream; synth/doc.go is the glue). The
// order of one request, every step refusing before the next costs anything:
//
//	rps (route wrapper) -> body (synth.Parse*) -> voice (own or public, token
//	voice_ids) -> synth.Prepare (ready, language) -> admit (feature, slot,
//	charge) -> synthesize -> Admission.Done (refund if no audio, free slot)
//
// speak answers the audio file. wav (the default) is buffered whole so that
// its header carries the true sizes and an engine failure is still a JSON
// error with a status; so is any format sent with an Idempotency-Key (the
// idempotency layer stores the body). Raw formats otherwise stream as the
// engine yields: the status is chosen at the first audio (an engine that
// fails before any audio is a JSON error), and a failure after it aborts the
// chunked body, which clients see as a truncated response, never as a
// short success.

// synthTimeout bounds a buffered synthesis, which cannot notice a client
// that left: 10,000 characters take far less.
const synthTimeout = 10 * time.Minute

var (
	hdrIdempotencyKey = []byte("Idempotency-Key")
	hdrSampleRate     = []byte("X-Sample-Rate")
	hdrAudioFormat    = []byte("X-Audio-Format")
	hdrChannels       = []byte("X-Channels")
	valOne            = []byte("1")
	contentTypeWAV    = []byte("audio/wav")
	contentTypeOctet  = []byte("application/octet-stream")
)

// synthJob is the core's job (synth.Job) and what the HTTP layer notes
// about it. Nothing in it points into the fasthttp request.
type synthJob struct {
	*synth.Job
	// start is when the request came (admitJob); tr its spans (tracing.go).
	start time.Time
	tr    jobTrace
}

// POST /voices/{id}/speak
func (s *Server) speak(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, err := synth.ParseSpeak(ctx.Request.Body())
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	job, err := s.prepareSynth(ctx, pathID(ctx), p, o)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	if !s.admitJob(ctx, p, job, false) {
		return
	}
	// A one-shot WAV carries its exact sizes, and a speak that may be
	// replayed is kept whole: both are buffered. Raw formats stream.
	buffered := o.Format == codec.WAV || len(ctx.Request.Header.PeekBytes(hdrIdempotencyKey)) > 0
	s.respondAudio(ctx, job, "speak", buffered, setAudioHeaders)
}

// admitJob admits a prepared synthesis (the core's admission: slot,
// charge, token) and sets the admission headers. On refusal the job is
// finished, the error answered, and it returns false.
func (s *Server) admitJob(ctx *fasthttp.RequestCtx, p *control.Principal, job *synthJob, streaming bool) bool {
	job.start = reqStart(ctx)
	var admitStart time.Time
	if s.tracer != nil {
		job.tr.rs = requestSpan(ctx)
		job.tr.rs.childSpan(s.tracer, "store", job.tr.lookupStart, job.tr.lookupEnd, nil)
		admitStart = time.Now()
	}
	err := job.Admit(ctx, s.core, p, streaming)
	if s.tracer != nil {
		job.tr.rs.childSpan(s.tracer, "admission", admitStart, time.Now(), err)
	}
	setAdmissionHeaders(ctx, job.Admission, err)
	if err != nil {
		s.writeError(ctx, err)
		return false
	}
	return true
}

// respondAudio answers an admitted synthesis with its audio, buffered whole
// or streamed as it is generated; setHeaders describes the audio. Speak and
// the compatible endpoint share it.
func (s *Server) respondAudio(ctx *fasthttp.RequestCtx, job *synthJob, route string,
	buffered bool, setHeaders func(*fasthttp.RequestCtx, *codec.Pipeline)) {
	if buffered {
		s.bufferedAudio(ctx, job, route, setHeaders)
		return
	}
	st, err := s.startStream(job, route, func(rctx context.Context, st *audioStream) (synth.Result, error) {
		return job.Run(rctx, st.Send) // after audio: aborts the body
	})
	if err != nil {
		s.synthFailed(ctx, err)
		return
	}
	setHeaders(ctx, job.Pipe)
	// A long text on a slow engine may stream for longer than the write
	// timeout of the route: bound each write instead of the whole body.
	st.slidingDeadline(ctx.Conn(), s.cfg.WriteTimeout)
	st.watchClient(ctx.Conn())
	ctx.SetBodyStream(st, -1)
}

// bufferedAudio synthesizes into the response body, then fixes the WAV
// header's sizes and calls setHeaders.
func (s *Server) bufferedAudio(ctx *fasthttp.RequestCtx, job *synthJob, route string,
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
	s.outcome(route, err)
	s.synthEnded(job, route, first, err)
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

// prepareSynth asks the core for the job of ref (voice id or alias) and
// notes the voice lookup's span times.
func (s *Server) prepareSynth(ctx *fasthttp.RequestCtx, ref string, p *control.Principal, o synth.Options) (*synthJob, error) {
	lookup := s.traceClock()
	j, err := s.core.Prepare(ctx, p, ref, o)
	if err != nil {
		return nil, err
	}
	return &synthJob{Job: j, tr: jobTrace{lookupStart: lookup, lookupEnd: s.traceClock()}}, nil
}
