package synth

import (
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/segmentio/asm/base64"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/jsonw"
)

// The SSE events of docs/api.md#sse-events, built by hand into a caller's buffer:
// a chunk event is the per-20-ms cost of every stream, and appending base64
// into a reused buffer is about 6x cheaper than json.Marshal, with no
// allocation. The base64 is segmentio/asm's (AVX2 on amd64, the same
// output as encoding/base64's StdEncoding): 4-5x faster, and it is most of
// what a chunk event costs.

// AppendSSEStart appends the start event: the effective rate and format.
func AppendSSEStart(dst []byte, rate int, f codec.Format) []byte {
	dst = append(dst, "event: start\ndata: {\"type\":\"start\",\"sample_rate\":"...)
	dst = strconv.AppendInt(dst, int64(rate), 10)
	dst = append(dst, ",\"audio_format\":"...)
	dst = jsonw.AppendString(dst, string(f))
	return append(dst, "}\n\n"...)
}

// AppendSSEChunk appends chunk event index with pcm in base64.
func AppendSSEChunk(dst []byte, index int, pcm []byte) []byte {
	dst = append(dst, "event: chunk\ndata: {\"type\":\"chunk\",\"index\":"...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, ",\"audio_b64\":\""...)
	n := len(dst)
	dst = slices.Grow(dst, base64.StdEncoding.EncodedLen(len(pcm)))[:n+base64.StdEncoding.EncodedLen(len(pcm))]
	base64.StdEncoding.Encode(dst[n:], pcm)
	return append(dst, "\"}\n\n"...)
}

// AppendSSEDone appends the done event. The duration is rounded to the
// microsecond: more digits say nothing and cost bytes.
func AppendSSEDone(dst []byte, durationSeconds float64) []byte {
	dst = append(dst, "event: done\ndata: {\"type\":\"done\",\"audio_duration_s\":"...)
	d := math.Round(durationSeconds*1e6) / 1e6
	if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
		d = 0 // JSON has no NaN; a negative duration is a bug upstream
	}
	dst = strconv.AppendFloat(dst, d, 'f', -1, 64)
	return append(dst, "}\n\n"...)
}

// AppendSSETimestamps appends a timestamps event: the words whose start is
// in the audio of the chunk events that follow.
func AppendSSETimestamps(dst []byte, sentence int, words []Word) []byte {
	dst = append(dst, "event: timestamps\ndata: {\"type\":\"timestamps\",\"sentence_index\":"...)
	dst = strconv.AppendInt(dst, int64(sentence), 10)
	dst = append(dst, `,"words":`...)
	dst = AppendWords(dst, words)
	return append(dst, "}\n\n"...)
}

// AppendSSEError appends the error event; the stream ends after it.
func AppendSSEError(dst []byte, code, message string) []byte {
	dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"code\":"...)
	dst = jsonw.AppendString(dst, code)
	dst = append(dst, ",\"message\":"...)
	dst = jsonw.AppendString(dst, message)
	return append(dst, "}\n\n"...)
}

// DefaultCoalesce is the audio per chunk event after the first: enough to
// keep event overhead low, little enough not to add latency a player hears
// (two 20 ms engine chunks, so a realtime stream's events are at most about
// 40 ms apart).
const DefaultCoalesce = 40 * time.Millisecond

// CoalesceBytes is the size of d of audio at rate in whole samples of width
// bytes; at least one sample.
func CoalesceBytes(rate, width int, d time.Duration) int {
	n := int(int64(rate) * int64(d) / int64(time.Second))
	return max(n, 1) * width
}

// Coalescer passes the first PCM it gets straight through, so the first
// audio leaves without waiting, and then gathers PCM into chunks of a fixed
// size of whole samples. Not safe for concurrent use.
type Coalescer struct {
	emit  func([]byte) error
	size  int
	width int
	buf   []byte
	first bool // the first chunk went out
}

// NewCoalescer gathers chunks of size bytes (rounded up to whole samples of
// width bytes) for emit. emit's argument is valid only during the call.
func NewCoalescer(size, width int, emit func([]byte) error) *Coalescer {
	width = max(width, 1)
	size = max((size+width-1)/width, 1) * width
	return &Coalescer{emit: emit, size: size, width: width, buf: make([]byte, 0, 2*size)}
}

// Write takes PCM in whole samples (a codec.Pipeline's PCM emits are). A
// trailing partial sample waits for the rest.
func (c *Coalescer) Write(p []byte) error {
	if !c.first && len(c.buf) > 0 {
		// Only a partial first sample waits here: complete it and go.
		c.buf = append(c.buf, p...)
		if n := len(c.buf) - len(c.buf)%c.width; n > 0 {
			c.first = true
			err := c.emit(c.buf[:n])
			c.buf = c.buf[:copy(c.buf, c.buf[n:])]
			return err
		}
		return nil
	}
	if !c.first {
		if n := len(p) - len(p)%c.width; n > 0 {
			c.first = true
			if err := c.emit(p[:n]); err != nil {
				return err
			}
			p = p[n:]
		}
	}
	if len(c.buf) == 0 {
		// Nothing pending: emit straight from p, copying only the rest.
		for len(p) >= c.size {
			if err := c.emit(p[:c.size]); err != nil {
				return err
			}
			p = p[c.size:]
		}
		c.buf = append(c.buf, p...)
		return nil
	}
	c.buf = append(c.buf, p...)
	off := 0
	for len(c.buf)-off >= c.size {
		if err := c.emit(c.buf[off : off+c.size]); err != nil {
			return err
		}
		off += c.size
	}
	c.buf = c.buf[:copy(c.buf, c.buf[off:])]
	return nil
}

// Flush emits what is pending, in whole samples.
func (c *Coalescer) Flush() error {
	n := len(c.buf) - len(c.buf)%c.width
	if n == 0 {
		return nil
	}
	err := c.emit(c.buf[:n])
	c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	c.first = true
	return err
}

// SSEWriter writes one synthesis as server-sent events: Start, Audio (a
// Sink) for each piece of PCM, then Done or Error. Every event is written to
// w and flushed at once; the first failed write or flush is returned and the
// caller stops (the client is gone). Not safe for concurrent use.
type SSEWriter struct {
	w     io.Writer
	flush func() error
	buf   []byte
	index int
	co    *Coalescer
	err   error
}

// NewSSEWriter writes events to w, calling flush after each (nil: none).
// chunkBytes sizes chunk events after the first (CoalesceBytes).
func NewSSEWriter(w io.Writer, flush func() error, chunkBytes, width int) *SSEWriter {
	s := &SSEWriter{w: w, flush: flush}
	s.co = NewCoalescer(chunkBytes, width, s.chunk)
	return s
}

// Start writes the start event.
func (s *SSEWriter) Start(rate int, f codec.Format) error {
	return s.write(AppendSSEStart(s.buf[:0], rate, f))
}

// Audio takes PCM from the pipeline; it has the signature of a Sink.
func (s *SSEWriter) Audio(pcm []byte) error {
	if s.err != nil {
		return s.err
	}
	return s.co.Write(pcm)
}

// Words writes a timestamps event. It is not flushed on its own: it goes
// out with the chunk event that follows it, which holds its words' starts
// or audio before them.
func (s *SSEWriter) Words(sentence int, words []Word) error {
	if s.err != nil {
		return s.err
	}
	s.buf = AppendSSETimestamps(s.buf[:0], sentence, words)
	if _, err := s.w.Write(s.buf); err != nil {
		s.err = err
	}
	return s.err
}

// Done writes what audio is pending and the done event.
func (s *SSEWriter) Done(durationSeconds float64) error {
	if err := s.co.Flush(); err != nil {
		return err
	}
	return s.write(AppendSSEDone(s.buf[:0], durationSeconds))
}

// Error writes what audio is pending, then the error event for err (a
// *control.Error, anything else shows as internal).
func (s *SSEWriter) Error(err error) error {
	if ferr := s.co.Flush(); ferr != nil {
		return ferr
	}
	e := control.AsError(err)
	return s.write(AppendSSEError(s.buf[:0], e.Code, e.Message))
}

// Chunks is the number of chunk events written.
func (s *SSEWriter) Chunks() int { return s.index }

func (s *SSEWriter) chunk(pcm []byte) error {
	s.buf = AppendSSEChunk(s.buf[:0], s.index, pcm)
	s.index++
	return s.write(s.buf)
}

func (s *SSEWriter) write(b []byte) error {
	if s.err != nil {
		return s.err
	}
	s.buf = b // keep the grown buffer for the next event
	if _, err := s.w.Write(b); err != nil {
		s.err = err
		return err
	}
	if s.flush != nil {
		if err := s.flush(); err != nil {
			s.err = err
			return err
		}
	}
	return nil
}
