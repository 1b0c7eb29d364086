// Package synth is the transport-neutral core of one synthesis: strict
// request parsing (ParseSpeak, ParseStream), the engine request (Prepare),
// driving engine and codec into a sink (Run), and the SSE framing of
// docs/api.md#sse-events (AppendSSE*, Coalescer, SSEWriter). HTTP speak and stream,
// the WebSocket and the compatible endpoint all use it the same way.
//
// The glue, per request, in this order (DESIGN.md "One synthesis"):
//
//	o, err := synth.ParseSpeak(body)                // or ParseStream; 400s
//	voice lookup, token/voice checks                 // 404, 403
//	lim.AllowRequest(ctx, ws.ID, l.RPS)              // 429 rate_limited
//	lease, free, err := lim.Acquire(ctx, ws.ID, control.SlotStream, l.Concurrency)
//	defer lease.Release()                            // idempotent
//	req, err := synth.Prepare(voice, o, eng.Languages()) // voice_not_ready, invalid_language
//	charge, remaining, err := meter.Charge(ctx, ws, o.Chars()) // 402 before any audio
//	p, _ := codec.NewPipeline(eng.NativeRate(), o.Format, o.SampleRate); defer p.Close()
//	res, err := synth.Run(ctx, eng, req, p, sink)
//	if res.Samples == 0 { meter.Refund(ctx, charge) } // nothing produced: not billed
//
// Rules the glue keeps:
//
//   - The slot is held for the whole synthesis: until the last audio byte is
//     written (speak: the body is out; SSE: after done or error) or the client
//     is gone. Release as soon as Run returns, not when the handler returns.
//   - The characters (o.Chars(), code points) are charged before synthesis,
//     after the limits: a request refused by a limit is never billed, and one
//     refused by billing (402, flat body) never holds the slot for long.
//   - Refund when Run produced no audio (Result.Samples == 0): an engine that
//     failed at once, busy, or a client gone before the first byte.
//   - Streaming transports on a plan without streaming, billing enforced:
//     403 feature_disabled (flat body, Feature "streaming") before the limits.
//   - X-Billing-Remaining is sent when remaining >= 0 (billing not off).
//   - Speak needs its headers before the body, so it either buffers Run's
//     output (then a Run error can still become a JSON error status) or
//     streams it (then an engine failure after the first byte can only cut
//     the body short). Buffering is the simple default: a 10,000-character
//     wav is a few MB.
//   - Speak headers (docs/api.md#synthesis): wav is Content-Type
//     audio/wav; raw formats application/octet-stream with X-Sample-Rate
//     (p.Rate()), X-Audio-Format and X-Channels: 1.
//   - SSE: errors before the first event answer a JSON body with a status;
//     after Start, Run's error becomes an error event (SSEWriter.Error) and
//     the stream ends. fasthttp does not cancel a handler when the client
//     leaves: the sink must return the first failed write or flush, and Run
//     then cancels the engine work before returning.
//   - A sink error is returned by Run unchanged, so the glue can tell "client
//     gone" (log, no answer) from a synthesis failure (*control.Error).
package synth
