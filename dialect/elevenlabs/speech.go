package elevenlabs

import (
	"context"
	"encoding/base64"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/synth"
	"voicesvc/web"
)

// The text-to-speech endpoints. The order of one request is speak's: rps
// (route wrapper) -> body and output_format (synth.ParseElevenLabs) -> the
// core's Prepare (voice, engine, language) and admission (slot, charge) ->
// synthesize -> finish. Without the plan's streaming feature every answer
// is made whole first, as the compatible endpoint does.
//
// convert and stream send the bytes of the output format (a WAV is
// buffered so that its header carries the true sizes); with-timestamps
// sends one JSON object, stream/with-timestamps one object a line, each
// {"audio_base64", "alignment", "normalized_alignment"} (alignment.go).
// voicesvc does not normalize text, so normalized_alignment is alignment.

var (
	argOutputFormat = []byte("output_format")
	contentTypeJSON = []byte("application/json")
)

// parse validates the request; nil with the error answered.
func (e *Protocol) parse(ctx *fasthttp.RequestCtx) (synth.Options, bool) {
	format := ctx.QueryArgs().PeekBytes(argOutputFormat)
	if !ctx.QueryArgs().Has("output_format") {
		format = nil
	}
	o, err := synth.ParseElevenLabs(ctx.Request.Body(), format)
	if err != nil {
		e.h.WriteError(ctx, err)
		return o, false
	}
	return o, true
}

// voiceID is the {voice_id} of the route: a voice id or name. It points
// into the request and must not be kept past the handler.
func voiceID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("voice_id").(string)
	return id
}

// POST /v1/text-to-speech/{voice_id}: the audio, streamed as the engine
// yields it where the plan streams and the format allows.
func (e *Protocol) convert(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, ok := e.parse(ctx)
	if !ok {
		return
	}
	if job := e.h.Begin(ctx, p, voiceID(ctx), o, false); job != nil {
		e.h.RespondAudio(ctx, job, e.series, !p.Limits.Streaming || o.Format == codec.WAV, setAudioHeaders)
	}
}

// POST /v1/text-to-speech/{voice_id}/stream
func (e *Protocol) stream(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, ok := e.parse(ctx)
	if !ok {
		return
	}
	if job := e.h.Begin(ctx, p, voiceID(ctx), o, false); job != nil {
		e.h.RespondAudio(ctx, job, e.series, !p.Limits.Streaming, setAudioHeaders)
	}
}

var (
	contentTypeMPEG = []byte("audio/mpeg")
	contentTypeWAV  = []byte("audio/wav")
	contentTypeOgg  = []byte("audio/ogg")
	contentTypePCM  = []byte("audio/pcm")
	contentTypeULaw = []byte("audio/basic")
	contentTypeALaw = []byte("audio/x-alaw-basic")
)

// setAudioHeaders: the media type of the format. Raw formats are audio/*
// too (LiveKit's plugin refuses an answer whose type is not audio/).
func setAudioHeaders(ctx *fasthttp.RequestCtx, p *codec.Pipeline) {
	h := &ctx.Response.Header
	switch p.Format() {
	case codec.MP3:
		h.SetContentTypeBytes(contentTypeMPEG)
	case codec.WAV:
		h.SetContentTypeBytes(contentTypeWAV)
	case codec.OggOpus:
		h.SetContentTypeBytes(contentTypeOgg)
	case codec.MuLaw:
		h.SetContentTypeBytes(contentTypeULaw)
	case codec.ALaw:
		h.SetContentTypeBytes(contentTypeALaw)
	default:
		h.SetContentTypeBytes(contentTypePCM)
	}
}

// POST /v1/text-to-speech/{voice_id}/with-timestamps: one JSON object, made
// whole before it is sent (so a failure is still an error status).
func (e *Protocol) withTimestamps(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, ok := e.parse(ctx)
	if !ok {
		return
	}
	job := e.h.Begin(ctx, p, voiceID(ctx), o, false)
	if job == nil {
		return
	}
	e.h.Stream(ctx, job, e.series, func(rctx context.Context, st web.Stream) (synth.Result, error) {
		var audio []byte
		al := newAligner(job.Options.Text)
		res, err := synth.Run(rctx, timed(job, al), job.Request, job.Pipe, func(b []byte) error {
			audio = append(audio, b...)
			return nil
		})
		if err != nil {
			return res, e.h.Cause(rctx, err)
		}
		al.finish(res.Duration)
		st.Write(appendTimestamped(nil, audio, al.take()))
		return res, st.Flush()
	}, setJSONHeaders)
}

// POST /v1/text-to-speech/{voice_id}/stream/with-timestamps: a line of JSON
// for each piece of audio, with the characters whose words started by
// then; the last line carries the rest of the text. A failure after the
// first line ends the body early.
func (e *Protocol) streamWithTimestamps(ctx *fasthttp.RequestCtx, p *control.Principal) {
	o, ok := e.parse(ctx)
	if !ok {
		return
	}
	job := e.h.Begin(ctx, p, voiceID(ctx), o, false)
	if job == nil {
		return
	}
	e.h.Stream(ctx, job, e.series, func(rctx context.Context, st web.Stream) (synth.Result, error) {
		al := newAligner(job.Options.Text)
		var line []byte
		send := func(audio []byte) error {
			line = appendTimestamped(line[:0], audio, al.take())
			if _, err := st.Write(line); err != nil {
				return err
			}
			return st.Flush()
		}
		size, width := pieceSize(job.Pipe)
		co := synth.NewCoalescer(size, width, send)
		res, err := synth.Run(rctx, timed(job, al), job.Request, job.Pipe, co.Write)
		if err == nil {
			err = co.Flush()
		}
		if err != nil {
			return res, e.h.Cause(rctx, err)
		}
		if al.finish(res.Duration); len(al.pending) > 0 || !st.Sent() {
			err = send(nil)
		}
		return res, err
	}, setJSONHeaders)
}

// pieceBytes sizes the lines of formats with no fixed sample width (MP3,
// Ogg Opus): 2 KiB is about 250 ms of 64 kbit/s MP3.
const pieceBytes = 2048

// pieceSize is the audio of one line after the first (which leaves at
// once): 100 ms of a raw format, in whole samples, or pieceBytes.
func pieceSize(p *codec.Pipeline) (size, width int) {
	width = p.Format().BytesPerSample()
	if p.Format() == codec.WAV {
		width = 2
	}
	if width == 0 {
		return pieceBytes, 1
	}
	return synth.CoalesceBytes(p.Rate(), width, 100*time.Millisecond), width
}

// timed is the job's engine with its words fed to al as they start, ahead
// of their audio (an engine without word times leaves every character to
// finish, spread over the whole audio).
func timed(job *web.Job, al *aligner) engine.Engine {
	eng := job.Engine
	if !engine.WordTimes(eng) {
		return eng
	}
	clock := synth.NewWordClock(eng.NativeRate(), job.Request.Text)
	return synth.Tap(eng, func(c engine.Chunk) error {
		for _, w := range clock.Chunk(c) {
			al.word(w)
		}
		return nil
	})
}

// appendTimestamped writes {"audio_base64","alignment","normalized_alignment"}
// and a newline (the streamed answer's separator, harmless in the whole one).
func appendTimestamped(b, audio []byte, cs []charTime) []byte {
	b = append(b, `{"audio_base64":"`...)
	b = base64.StdEncoding.AppendEncode(b, audio)
	b = append(b, `","alignment":`...)
	start := len(b)
	b = appendAlignmentSeconds(b, cs)
	al := b[start:]
	b = append(b, `,"normalized_alignment":`...)
	b = append(b, al...)
	return append(b, "}\n"...)
}

func setJSONHeaders(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
}
