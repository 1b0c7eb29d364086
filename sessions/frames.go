package sessions

import (
	"math"
	"strconv"
	"sync"
	"voicesvc/jsonw"
	"voicesvc/synth"
)

// frame is one unit of the outbound queue: a JSON text frame, optionally
// paired with the binary frame that must follow it with nothing between.
// Frames are pooled: audio chunks are the hot path and must not allocate.
type frame struct {
	// task, when set, makes the frame droppable: the writer skips it once
	// the task is gone (cancelled). task_done carries its task too (a
	// context stays cancellable until its task_done is taken for writing);
	// the other terminal replies (task_cancelled, task_failed) and session
	// frames leave it nil.
	task *task
	// kind lets cancel count what it purges (sentence_done frames).
	kind frameKind
	hdr  []byte // JSON text frame
	bin  []byte // binary payload, only for audio pairs
	pair bool
	cost int     // frameCost when queued, so that taking it gives back the same
	dur  float64 // seconds of audio an audio pair carries (the cancel receipt)
}

type frameKind uint8

const (
	kindOther frameKind = iota
	kindAudio
	kindSentenceDone
	kindTaskDone
	kindPong // a pong control frame: hdr is its payload
)

// wireSize bounds the frame's encoded size (two WebSocket headers of at
// most 10 bytes).
func (f *frame) wireSize() int { return len(f.hdr) + len(f.bin) + 20 }

// maxPooledBin keeps one unusually large chunk from pinning its buffer in
// the pool for the life of the process.
const maxPooledBin = 64 << 10

var framePool = sync.Pool{New: func() any { return &frame{hdr: make([]byte, 0, 192)} }}

func getFrame() *frame {
	f := framePool.Get().(*frame)
	f.hdr = f.hdr[:0]
	f.bin = f.bin[:0]
	return f
}

func putFrame(f *frame) {
	f.task, f.kind, f.pair, f.dur = nil, kindOther, false, 0
	if cap(f.bin) > maxPooledBin {
		f.bin = nil
	}
	framePool.Put(f)
}

// JSON is written by hand: the shapes are fixed and few, and going through
// encoding/json would allocate on every audio chunk.

// appendSeconds writes a duration in seconds rounded to microseconds, the
// precision clients can use, without exponent notation.
func appendSeconds(b []byte, s float64) []byte {
	return strconv.AppendFloat(b, math.Round(s*1e6)/1e6, 'f', -1, 64)
}

func appendMillis(b []byte, ms float64) []byte {
	return strconv.AppendFloat(b, math.Round(ms*1000)/1000, 'f', -1, 64)
}

// Each builder appends a complete JSON object. idJSON is the task's
// context_id already quoted and escaped.

func appendAudioChunk(b, idJSON []byte, sentence, chunk int, dur float64, n int) []byte {
	b = append(b, `{"type":"audio_chunk","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sentence_index":`...)
	b = strconv.AppendInt(b, int64(sentence), 10)
	b = append(b, `,"chunk_index":`...)
	b = strconv.AppendInt(b, int64(chunk), 10)
	b = append(b, `,"audio_duration_s":`...)
	b = appendSeconds(b, dur)
	b = append(b, `,"byte_length":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '}')
}

func appendTaskStarted(b, idJSON []byte, rate int, format string, timestamps bool) []byte {
	b = append(b, `{"type":"task_started","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sample_rate":`...)
	b = strconv.AppendInt(b, int64(rate), 10)
	b = append(b, `,"audio_format":`...)
	b = jsonw.AppendString(b, format)
	b = append(b, `,"timestamps":`...)
	b = strconv.AppendBool(b, timestamps)
	return append(b, '}')
}

// appendWordTimestamps: the words whose start is in the audio that follows
// (docs/realtime.md#word_timestamps).
func appendWordTimestamps(b, idJSON []byte, sentence int, words []synth.Word) []byte {
	b = append(b, `{"type":"word_timestamps","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sentence_index":`...)
	b = strconv.AppendInt(b, int64(sentence), 10)
	b = append(b, `,"words":`...)
	b = synth.AppendWords(b, words)
	return append(b, '}')
}

func appendSentenceDone(b, idJSON []byte, index int, text string, dur float64) []byte {
	b = append(b, `{"type":"sentence_done","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sentence_index":`...)
	b = strconv.AppendInt(b, int64(index), 10)
	b = append(b, `,"text":`...)
	b = jsonw.AppendString(b, text)
	b = append(b, `,"audio_duration_s":`...)
	b = appendSeconds(b, dur)
	return append(b, '}')
}

func appendTaskDone(b, idJSON []byte, n int, total, ttfbMS, genMS float64, trace string) []byte {
	b = append(b, `{"type":"task_done","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"num_sentences":`...)
	b = strconv.AppendInt(b, int64(n), 10)
	b = append(b, `,"total_audio_duration_s":`...)
	b = appendSeconds(b, total)
	b = append(b, `,"profile":{"ttfb_ms":`...)
	b = appendMillis(b, ttfbMS)
	b = append(b, `,"generate_ms":`...)
	b = appendMillis(b, genMS)
	b = append(b, `,"overall_rtf":`...)
	rtf := 0.0
	if total > 0 {
		rtf = genMS / 1000 / total
	}
	b = strconv.AppendFloat(b, math.Round(rtf*1e4)/1e4, 'f', -1, 64)
	b = append(b, `},"trace_id":`...)
	b = jsonw.AppendString(b, trace)
	return append(b, '}')
}

func appendTaskCancelled(b, idJSON []byte, completed, dropped int, r receipt, trace string) []byte {
	b = append(b, `{"type":"task_cancelled","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sentences_completed":`...)
	b = strconv.AppendInt(b, int64(completed), 10)
	b = append(b, `,"sentences_dropped":`...)
	b = strconv.AppendInt(b, int64(dropped), 10)
	b = append(b, `,"audio_sent_s":`...)
	b = appendSeconds(b, r.audioSent)
	b = append(b, `,"spoken_until":`...)
	b = strconv.AppendInt(b, int64(r.spokenUntil), 10)
	b = append(b, `,"trace_id":`...)
	b = jsonw.AppendString(b, trace)
	return append(b, '}')
}

// appendTaskFailed writes a task_failed frame. retryAfter > 0 adds
// retry_after, the whole seconds a context refused for capacity should wait
// before it is opened again: the Retry-After an HTTP refusal carries, which
// grows while most new work is refused, so retries do not become the load.
func appendTaskFailed(b, idJSON []byte, completed int, code string, retryAfter int, trace string) []byte {
	b = append(b, `{"type":"task_failed","context_id":`...)
	b = append(b, idJSON...)
	b = append(b, `,"sentences_completed":`...)
	b = strconv.AppendInt(b, int64(completed), 10)
	b = append(b, `,"code":`...)
	b = jsonw.AppendString(b, code)
	if retryAfter > 0 {
		b = append(b, `,"retry_after":`...)
		b = strconv.AppendInt(b, int64(retryAfter), 10)
	}
	b = append(b, `,"trace_id":`...)
	b = jsonw.AppendString(b, trace)
	return append(b, '}')
}

// appendError writes an error frame; contextID "" omits the field.
func appendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	b = append(b, `{"type":"error"`...)
	if contextID != "" {
		b = append(b, `,"context_id":`...)
		b = jsonw.AppendString(b, contextID)
	}
	b = append(b, `,"code":`...)
	b = jsonw.AppendString(b, code)
	b = append(b, `,"message":`...)
	b = jsonw.AppendString(b, msg)
	b = append(b, `,"fatal":`...)
	b = strconv.AppendBool(b, fatal)
	return append(b, '}')
}

func appendSessionEnded(b []byte, reason string) []byte {
	b = append(b, `{"type":"session_ended","reason":`...)
	b = jsonw.AppendString(b, reason)
	return append(b, '}')
}

// nativeEncoder is a context's events in the native protocol.
type nativeEncoder struct {
	idJSON     []byte // the context_id, quoted and escaped once
	rate       int
	format     string
	timestamps bool
}

func (native) Encoder(c *ContextInfo) Encoder {
	return &nativeEncoder{idJSON: jsonw.AppendString(nil, c.ID), rate: c.SampleRate, format: c.Format, timestamps: c.Timestamps}
}

func (native) AppendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	return appendError(b, contextID, code, msg, fatal)
}

func (native) AppendSessionEnded(b []byte, reason string) []byte {
	return appendSessionEnded(b, reason)
}

func (e *nativeEncoder) Started(b []byte) []byte {
	return appendTaskStarted(b, e.idJSON, e.rate, e.format, e.timestamps)
}

func (e *nativeEncoder) Audio(b, bin []byte, a *Audio) ([]byte, []byte) {
	return appendAudioChunk(b, e.idJSON, a.Sentence, a.Chunk, a.Duration, len(a.Bytes)), append(bin, a.Bytes...)
}

func (e *nativeEncoder) Words(b []byte, sentence int, _ string, _ int, words []synth.Word) []byte {
	return appendWordTimestamps(b, e.idJSON, sentence, words)
}

func (e *nativeEncoder) SentenceDone(b []byte, sentence int, text string, dur float64) []byte {
	return appendSentenceDone(b, e.idJSON, sentence, text, dur)
}

// Flushed: the native protocol has no flush (idle_flush_ms and finalize).
func (e *nativeEncoder) Flushed(b []byte, _ string) []byte { return b }

func (e *nativeEncoder) Done(b []byte, d *Done) []byte {
	return appendTaskDone(b, e.idJSON, d.Sentences, d.AudioS, d.FirstAudioMS, d.Generate, d.Trace)
}

func (e *nativeEncoder) Cancelled(b []byte, c *Cancelled) []byte {
	return appendTaskCancelled(b, e.idJSON, c.Completed, c.Dropped, receipt{audioSent: c.AudioSentS, spokenUntil: c.SpokenUntil}, c.Trace)
}

func (e *nativeEncoder) Failed(b []byte, code string, retryAfter, completed int, trace string) []byte {
	return appendTaskFailed(b, e.idJSON, completed, code, retryAfter, trace)
}
