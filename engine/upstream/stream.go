package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"voicesvc/engine"
	"voicesvc/jsonw"
)

// speechBody is the OpenAI speech request.
type speechBody struct {
	Model          string  `json:"model"`
	Input          string  `json:"input"`
	Voice          string  `json:"voice"`
	ResponseFormat string  `json:"response_format"`
	Stream         bool    `json:"stream"`
	Speed          float64 `json:"speed,omitempty"`
}

// appendJSON appends b as encoding/json would marshal it, by hand as the
// server's other hot paths do (package jsonw).
func (b *speechBody) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"model":`...)
	dst = jsonw.AppendString(dst, b.Model)
	dst = append(dst, `,"input":`...)
	dst = jsonw.AppendString(dst, b.Input)
	dst = append(dst, `,"voice":`...)
	dst = jsonw.AppendString(dst, b.Voice)
	dst = append(dst, `,"response_format":`...)
	dst = jsonw.AppendString(dst, b.ResponseFormat)
	dst = append(dst, `,"stream":`...)
	dst = strconv.AppendBool(dst, b.Stream)
	if b.Speed != 0 {
		// Speeds are 0.25 to 4: encoding/json's 'f' range.
		dst = append(dst, `,"speed":`...)
		dst = strconv.AppendFloat(dst, b.Speed, 'f', -1, 64)
	}
	return append(dst, '}')
}

// bodyBuffers hold request bodies while they are written.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// maxErrorBody bounds what is read of a refusal's body.
const maxErrorBody = 4 << 10

// readBuffers hold a response's bytes between the socket and conversion:
// 16 KiB is a third of a second of 24 kHz pcm, more than an upstream
// usually has ready at once.
var readBuffers = sync.Pool{New: func() any { b := make([]byte, 16<<10); return &b }}

// attempt sends the sentence to r and streams its audio to emit. emitted
// says whether any chunk reached emit; stale that the request failed on a
// reused connection before any answer, which is worth resending at once.
//
// left is what remains of the sentence's SentenceTimeout, and the attempt
// takes the time it waits for the upstream off it. What the upstream may
// send is bounded by Config.maxSentenceBytes.
func (e *Engine) attempt(ctx context.Context, r *replica, body *speechBody, index int, left *time.Duration, emit func(engine.Chunk) error) (emitted, stale bool, aerr *attemptError) {
	r.stats.requests.Add(1)
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The clock runs only while we wait for the upstream, with two bounds:
	// Timeout until the first audio byte, then between reads (a stalled
	// stream ends like one that never started), and what is left of the
	// sentence's SentenceTimeout (an upstream that drips its answer, a
	// byte at a time, ends there). overall says which one the timer was
	// last armed for.
	var overall atomic.Bool
	arm := func() time.Duration {
		overall.Store(*left <= e.cfg.Timeout)
		return min(e.cfg.Timeout, *left)
	}
	since := time.Now()
	timer := time.AfterFunc(arm(), func() {
		if overall.Load() {
			cancel(errSentenceTimeout)
		} else {
			cancel(errTimeout)
		}
	})
	defer func() {
		timer.Stop()
		if !since.IsZero() {
			*left -= time.Since(since)
		}
	}()
	bb := bodyBuffers.Get().(*[]byte)
	*bb = body.appendJSON((*bb)[:0])
	x, reused, err := r.client.do(actx, &request{method: http.MethodPost, head: r.speechHead, body: *bb})
	bodyBuffers.Put(bb)
	if err != nil {
		aerr = e.transportError(ctx, actx, r, err, "request failed")
		// A reused connection the server had closed fails before any
		// answer; a timeout or an oversized answer is no such race.
		cause := context.Cause(actx)
		stale = reused && aerr.class != classCancel && !errors.Is(cause, errTimeout) &&
			!errors.Is(cause, errSentenceTimeout) && !errors.Is(err, errHeaderTooLarge)
		return false, stale, aerr
	}
	// Reused only when the body was read to its end; otherwise the
	// connection is closed, and the upstream sees the disconnect and
	// stops rendering.
	atEOF := false
	defer func() { x.done(atEOF) }()
	resp := x.resp
	if resp.StatusCode/100 != 2 {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		atEOF = rerr == nil && len(b) < maxErrorBody
		return false, false, e.statusError(r, resp, upstreamMessage(b, resp.StatusCode))
	}
	if ct := resp.Header.Get("Content-Type"); !pcmType(ct) {
		return false, false, &attemptError{class: classUpstream,
			err: fmt.Errorf("upstream %s (%s) answered %q, not pcm audio", e.cfg.Name, r.display, ct)}
	}
	if err := e.checkLayout(resp.Header); err != nil {
		return false, false, &attemptError{class: classUpstream,
			err: fmt.Errorf("upstream %s (%s): %w", e.cfg.Name, r.display, err)}
	}
	// What the upstream may send for this sentence: an answer without end
	// (no Content-Length, pcm forever) fails once past it, and one that
	// declares more fails at once.
	limit := e.cfg.maxSentenceBytes(body.Input, body.Speed)
	if resp.ContentLength > limit {
		return false, false, e.tooLong(r, body, limit, fmt.Sprintf("declared Content-Length %d, more", resp.ContentLength))
	}
	var got int64
	bp := readBuffers.Get().(*[]byte)
	defer readBuffers.Put(bp)
	pcm := pcmChunker{sentence: index, size: e.chunk}
	out := func(c engine.Chunk) error {
		emitted = true
		return emit(c)
	}
	for {
		n, rerr := resp.Body.Read(*bp)
		if n > 0 {
			if got += int64(n); got > limit {
				pcm.drop()
				return emitted, false, e.tooLong(r, body, limit, "sent more")
			}
			// The clock runs only while we wait for the upstream: emit
			// may block as long as the listener needs (a WebSocket
			// session pauses synthesis while its client catches up).
			timer.Stop()
			*left -= time.Since(since)
			since = time.Time{}
			err := pcm.write((*bp)[:n], out)
			if err == nil && !emitted && len(pcm.cur) > 0 {
				// The sentence's first audio leaves with the first read,
				// whole chunk or not: someone is waiting for it.
				err = pcm.flush(out)
			}
			if err != nil {
				pcm.drop()
				return emitted, false, &attemptError{class: classCancel, err: err}
			}
			since = time.Now()
			timer.Reset(arm())
		}
		if rerr == io.EOF {
			atEOF = true
			if err := pcm.finish(out); err != nil {
				return emitted, false, &attemptError{class: classCancel, err: err}
			}
			return emitted, false, nil
		}
		if rerr != nil {
			pcm.drop()
			return emitted, false, e.transportError(ctx, actx, r, rerr, "audio stream cut short")
		}
	}
}

// transportError classifies a failure to reach the upstream or to read its
// stream: the caller's cancellation, the timeout, a refused connection
// (busy) or anything else.
func (e *Engine) transportError(ctx, actx context.Context, r *replica, err error, what string) *attemptError {
	switch {
	case ctx.Err() != nil:
		return &attemptError{class: classCancel, err: ctx.Err()}
	case errors.Is(context.Cause(actx), errSentenceTimeout):
		return &attemptError{class: classUpstream, unhealthy: true, retry: true,
			err: fmt.Errorf("upstream %s (%s): %s: %w (sentence_timeout %v)", e.cfg.Name, r.display, what, errSentenceTimeout, e.cfg.SentenceTimeout)}
	case errors.Is(context.Cause(actx), errTimeout):
		return &attemptError{class: classUpstream, unhealthy: true, retry: true,
			err: fmt.Errorf("upstream %s (%s): %s: %w (%v)", e.cfg.Name, r.display, what, errTimeout, e.cfg.Timeout)}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &attemptError{class: classBusy, unhealthy: true, retry: true,
			err: &BusyError{RetryAfter: 1, Reason: fmt.Sprintf("upstream %s (%s) refused the connection", e.cfg.Name, r.display)}}
	}
	return &attemptError{class: classUpstream, unhealthy: true, retry: true,
		err: fmt.Errorf("upstream %s (%s): %s: %w", e.cfg.Name, r.display, what, err)}
}

// tooLong is the failure of an answer larger than limit, the bound of
// Config.maxSentenceBytes: an upstream gone wrong (502 upstream_error),
// which counts toward ejecting the replica.
func (e *Engine) tooLong(r *replica, body *speechBody, limit int64, what string) *attemptError {
	return &attemptError{class: classUpstream, unhealthy: true, retry: true,
		err: fmt.Errorf("upstream %s (%s) %s than the %d bytes allowed for %d characters (max_audio_seconds_per_char %g, max_sentence_bytes %d)",
			e.cfg.Name, r.display, what, limit, utf8.RuneCountInString(body.Input), e.cfg.MaxAudioSecondsPerChar, e.cfg.MaxSentenceBytes)}
}

// checkLayout compares the layout headers voicesvc's compat (and some
// others) send with the configuration: audio at another rate would play at
// the wrong pitch, and stereo at half speed.
func (e *Engine) checkLayout(h http.Header) error {
	if v := h.Get("X-Sample-Rate"); v != "" {
		if rate, err := strconv.Atoi(v); err != nil || rate != e.cfg.SampleRate {
			return fmt.Errorf("the audio is at X-Sample-Rate %q, the configured sample_rate is %d", v, e.cfg.SampleRate)
		}
	}
	if v := h.Get("X-Channels"); v != "" && v != "1" {
		return fmt.Errorf("the audio has X-Channels %q, want mono", v)
	}
	if v := h.Get("X-Audio-Format"); v != "" && !strings.EqualFold(v, "s16le") {
		return fmt.Errorf("the audio is X-Audio-Format %q, want s16le", v)
	}
	return nil
}

// pcmType accepts the types servers give raw pcm (Kokoro-FastAPI says
// audio/pcm, others octet-stream or nothing) and refuses what is surely
// not it: an error page, or an encoded format sent despite the request.
func pcmType(ct string) bool {
	if ct == "" {
		return true
	}
	t, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch t {
	case "audio/pcm", "audio/l16", "audio/raw", "audio/x-raw", "application/octet-stream", "binary/octet-stream":
		return true
	}
	return false
}

// pcmChunker turns s16le bytes, cut anywhere (an odd count included), into
// float32 chunks of size samples.
type pcmChunker struct {
	sentence int
	size     int
	cur      []float32 // the chunk being filled; len = samples so far
	odd      bool      // carry holds the low byte of a sample
	carry    byte
}

func (p *pcmChunker) write(b []byte, emit func(engine.Chunk) error) error {
	if p.odd && len(b) > 0 {
		p.odd = false
		if err := p.put(int16(uint16(p.carry)|uint16(b[0])<<8), emit); err != nil {
			return err
		}
		b = b[1:]
	}
	for len(b) >= 2 {
		if p.cur == nil {
			p.cur = p.buffer()
		}
		n := min(p.size-len(p.cur), len(b)/2)
		dst := p.cur[len(p.cur) : len(p.cur)+n]
		for i := range dst {
			dst[i] = float32(int16(uint16(b[2*i])|uint16(b[2*i+1])<<8)) / 32768
		}
		p.cur = p.cur[:len(p.cur)+n]
		b = b[2*n:]
		if len(p.cur) == p.size {
			if err := p.flush(emit); err != nil {
				return err
			}
		}
	}
	if len(b) == 1 {
		p.odd, p.carry = true, b[0]
	}
	return nil
}

// buffer is an empty chunk of room for size samples. Not
// engine.SampleBuffer's: nothing in the server gives an upstream's chunks
// back (its consumers encode or copy them, but the engine is not wrapped in
// engine.Recycled: sessions queue its chunks ahead), so each would be a
// fresh buffer sized for an espeak chunk, 16 KiB allocated and cleared for
// the 1.9 KiB of 20 ms at 24 kHz: at 64 streams the gateway spent a third
// of its CPU on it, most of it in the garbage collector (0.0012 to 0.0008
// CPU seconds per audio second once sized to fit).
func (p *pcmChunker) buffer() []float32 { return make([]float32, 0, p.size) }

func (p *pcmChunker) put(s int16, emit func(engine.Chunk) error) error {
	if p.cur == nil {
		p.cur = p.buffer()
	}
	p.cur = append(p.cur, float32(s)/32768)
	if len(p.cur) == p.size {
		return p.flush(emit)
	}
	return nil
}

func (p *pcmChunker) flush(emit func(engine.Chunk) error) error {
	c := engine.Chunk{Samples: p.cur, Sentence: p.sentence}
	p.cur = nil
	return emit(c)
}

// finish emits what is left as the sentence's last chunk (possibly empty).
// A lone trailing byte is half a sample: dropped.
func (p *pcmChunker) finish(emit func(engine.Chunk) error) error {
	c := engine.Chunk{Samples: p.cur, Sentence: p.sentence, Last: true}
	p.cur = nil
	return emit(c)
}

// drop forgets a partly filled chunk that will not be emitted.
func (p *pcmChunker) drop() { p.cur = nil }
