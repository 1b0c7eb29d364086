package synth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine"
)

// Sink receives encoded audio in order, as soon as it exists. b is valid only
// during the call (the pipeline reuses it): copy to keep. An error stops the
// synthesis at once; Run returns it unchanged.
type Sink func(b []byte) error

// Result describes the audio one Run produced, also when it failed midway.
type Result struct {
	// Samples at the output rate handed to the sink. Zero means no audio
	// was produced: the glue refunds the charge.
	Samples  int64
	Duration float64 // seconds: Samples / the pipeline's rate
	Bytes    int64   // encoded bytes handed to the sink, headers included
	Chunks   int     // engine chunks
	// TTFB is from the call of Run to the first bytes handed to the sink;
	// EngineTTFB to the first engine chunk. Zero when there was none.
	TTFB       time.Duration
	EngineTTFB time.Duration
}

// wavHeaderLen is codec.AppendWAVHeader's canonical header, which the
// pipeline sends with the first audio of a wav stream.
const wavHeaderLen = 44

// Run synthesizes req with eng and passes the audio through p to out. It is
// synchronous: it returns when the audio is out, the engine failed, ctx ended
// or out failed. The caller owns p (and closes it); one pipeline per Run.
//
// Errors: out's error unchanged (the client is gone: the engine work is
// cancelled before Run returns); ctx.Err() when ctx ended; otherwise a
// *control.Error from EngineError (upstream_busy, invalid_input,
// upstream_error), or an internal error when the codec failed.
func Run(ctx context.Context, eng engine.Engine, req engine.Request, p *codec.Pipeline, out Sink) (Result, error) {
	start := time.Now()
	var res Result
	var inSamples int64
	var sinkErr, codecErr error
	// The engine (a pool) may have work in flight beyond the emit call that
	// fails; cancelling stops it rather than waiting for its next emit.
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()

	emitBytes := func(b []byte) error {
		if res.Bytes == 0 {
			res.TTFB = time.Since(start)
		}
		if err := out(b); err != nil {
			// Not counted: a client gone before its first audio is not
			// billed for it.
			sinkErr = err
			cancel()
			return err
		}
		res.Bytes += int64(len(b))
		return nil
	}
	encode := func(err error) error {
		if err != nil && sinkErr == nil {
			codecErr = err
		}
		return err
	}
	err := eng.Synthesize(ectx, req, func(c engine.Chunk) error {
		if res.Chunks == 0 {
			res.EngineTTFB = time.Since(start)
		}
		res.Chunks++
		inSamples += int64(len(c.Samples))
		return encode(p.Write(c.Samples, emitBytes))
	})
	if err == nil && ctx.Err() == nil {
		err = encode(p.Flush(emitBytes))
	}
	res.Samples = outputSamples(p, res.Bytes, inSamples, eng.NativeRate())
	res.Duration = float64(res.Samples) / float64(p.Rate())
	switch {
	case sinkErr != nil:
		return res, sinkErr
	case ctx.Err() != nil:
		return res, ctx.Err()
	case codecErr != nil:
		return res, fmt.Errorf("synth: encode: %w", codecErr) // internal
	}
	return res, EngineError(err)
}

// outputSamples counts the samples the sink got: exactly from the bytes for
// PCM and WAV, estimated from the engine's samples for compressed formats.
func outputSamples(p *codec.Pipeline, bytes, in int64, inRate int) int64 {
	f := p.Format()
	switch {
	case f.IsPCM():
		return bytes / int64(f.BytesPerSample())
	case f == codec.WAV:
		return max(bytes-wavHeaderLen, 0) / 2
	default:
		return in * int64(p.Rate()) / int64(inRate)
	}
}

// EngineError maps an engine failure to the error clients see: ErrBusy is
// 503 upstream_busy with Retry-After 1 (or the delay the error carries,
// an upstream's own Retry-After), ErrUnknownEngine 503 unavailable, ErrInvalidInput 422 invalid_input,
// anything else 502 upstream_error. An error that already is (or wraps) a
// *control.Error passes as it is. The result wraps the *control.Error
// (control.AsError and errors.As find it) and its Error() keeps the engine's
// detail for the log; the client sees only the Message.
func EngineError(err error) error {
	var ce *control.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.Is(err, engine.ErrBusy):
		ce = &control.Error{Code: control.EUpstreamBusy, Message: "the synthesis engine is at capacity", RetryAfter: 1}
		// An upstream at capacity says when to come back (its Retry-After,
		// or when its ejected replicas return): pass that on.
		var ra interface{ RetryAfterSeconds() int }
		if errors.As(err, &ra) && ra.RetryAfterSeconds() > 0 {
			ce.RetryAfter = ra.RetryAfterSeconds()
		}
	case errors.Is(err, engine.ErrUnknownEngine):
		ce = &control.Error{Code: control.EUnavailable, Message: "the voice's synthesis engine is not configured on this server"}
	case errors.Is(err, engine.ErrInvalidInput):
		// The one engine failure the client can act on: keep the reason.
		ce = &control.Error{Code: control.EInvalidInput, Message: err.Error()}
	default:
		ce = &control.Error{Code: control.EUpstreamError, Message: "the synthesis engine failed"}
	}
	return &engineError{ce: ce, cause: err}
}

// engineError is a *control.Error with its cause for the log.
type engineError struct {
	ce    *control.Error
	cause error
}

func (e *engineError) Error() string   { return e.ce.Error() + " (" + e.cause.Error() + ")" }
func (e *engineError) Unwrap() []error { return []error{e.ce, e.cause} }
