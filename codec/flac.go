package codec

/*
#cgo pkg-config: flac
#include <FLAC/stream_encoder.h>
#include <stdlib.h>
#include <string.h>

// sink collects what the encoder writes between two calls from Go, in C
// memory: a write callback into Go would cost a cgo callback per frame and
// a handle to find the Go encoder; this way Go copies the bytes out once
// per call.
typedef struct {
	unsigned char *buf;
	size_t len, cap;
} sink;

static FLAC__StreamEncoderWriteStatus sinkWrite(const FLAC__StreamEncoder *e,
		const FLAC__byte b[], size_t n, uint32_t samples, uint32_t frame, void *data) {
	sink *s = data;
	if (s->len + n > s->cap) {
		size_t c = 2 * s->cap;
		if (c < s->len + n) c = s->len + n;
		unsigned char *p = realloc(s->buf, c);
		if (p == NULL) return FLAC__STREAM_ENCODER_WRITE_STATUS_FATAL_ERROR;
		s->buf = p;
		s->cap = c;
	}
	memcpy(s->buf + s->len, b, n);
	s->len += n;
	return FLAC__STREAM_ENCODER_WRITE_STATUS_OK;
}

// newFLAC sets up a streaming 16-bit mono encoder. No seek callback: the
// stream is never rewritten, so STREAMINFO keeps total samples 0 and an
// all-zero MD5, which the format defines as unknown. (libFLAC still
// computes the MD5: its public API has no switch for that.)
static FLAC__StreamEncoder *newFLAC(unsigned rate, unsigned level, unsigned block, sink *s, int *status) {
	FLAC__StreamEncoder *e = FLAC__stream_encoder_new();
	if (e == NULL) { *status = -1; return NULL; }
	FLAC__bool ok = FLAC__stream_encoder_set_channels(e, 1)
		&& FLAC__stream_encoder_set_bits_per_sample(e, 16)
		&& FLAC__stream_encoder_set_sample_rate(e, rate)
		&& FLAC__stream_encoder_set_compression_level(e, level)
		&& FLAC__stream_encoder_set_blocksize(e, block)
		&& FLAC__stream_encoder_set_streamable_subset(e, true);
	if (!ok) { *status = -2; FLAC__stream_encoder_delete(e); return NULL; }
	*status = FLAC__stream_encoder_init_stream(e, sinkWrite, NULL, NULL, NULL, s);
	if (*status != FLAC__STREAM_ENCODER_INIT_STATUS_OK) { FLAC__stream_encoder_delete(e); return NULL; }
	return e;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// FLAC settings. Level 5 is the flac tool's default, the usual balance
// of size and speed.
//
// The block size sets the latency: libFLAC emits a frame once it holds a
// whole block plus one sample, so the first audio bytes wait for one block
// of input. 1152 samples are 48 ms at 24 kHz. It also compresses speech
// best: 10 s of espeak-ng speech at 24 kHz took 189.6 kbit/s at block 576,
// 188.6 at 1152, 190.6 at 2048 and 198.0 at libFLAC's default 4096
// (speech changes faster than 4096 samples, so shorter LPC blocks fit it
// better).
const (
	FLACLevel     = 5
	FLACBlockSize = 1152
)

// FLACEncoder writes a streamable 16-bit mono FLAC stream through
// libFLAC, the reference encoder (LPC up to order 8 at level 5; the Go
// encoder of mewkiz/flac tries fixed predictors only and allocates on
// every frame). The first bytes out are the "fLaC" marker and STREAMINFO
// with total samples 0 and MD5 all zeros (unknown: a stream's length is
// not known when its header goes out). Not safe for concurrent use.
type FLACEncoder struct {
	enc   *C.FLAC__StreamEncoder
	sink  *C.sink     // C memory
	pcm   []C.int32_t // reused
	ended bool
}

// NewFLACEncoder encodes mono audio at rate (1-655350 Hz; the streamable
// subset this encoder keeps to takes up to 48000 Hz at this block size,
// and any integer rate up to 65535 fits a frame header).
func NewFLACEncoder(rate int) (*FLACEncoder, error) { return newFLACEncoder(rate, FLACBlockSize) }

// newFLACStream is the registry's constructor: FLAC at the requested rate.
func newFLACStream(c EncoderConfig) (Encoder, error) {
	e, err := NewFLACEncoder(c.Rate)
	if err != nil {
		return nil, err
	}
	return &appendEncoder{a: e}, nil
}

func newFLACEncoder(rate, block int) (*FLACEncoder, error) {
	if rate <= 0 || rate > 655350 {
		return nil, fmt.Errorf("codec: flac at %d Hz", rate)
	}
	s := (*C.sink)(C.calloc(1, C.size_t(unsafe.Sizeof(C.sink{}))))
	if s == nil {
		return nil, fmt.Errorf("codec: flac: out of memory")
	}
	var status C.int
	e := C.newFLAC(C.uint(rate), FLACLevel, C.uint(block), s, &status)
	if e == nil {
		C.free(unsafe.Pointer(s.buf))
		C.free(unsafe.Pointer(s))
		return nil, fmt.Errorf("codec: flac encoder at %d Hz: init status %d", rate, int(status))
	}
	return &FLACEncoder{enc: e, sink: s}, nil
}

// Encode appends to dst the bytes libFLAC completed while taking samples
// (the stream header on the first call, then whole frames; often nothing,
// until a block fills).
func (e *FLACEncoder) Encode(dst []byte, samples []float32) ([]byte, error) {
	if e.enc == nil || e.ended {
		return dst, ErrClosed
	}
	if len(samples) > 0 {
		if cap(e.pcm) < len(samples) {
			e.pcm = make([]C.int32_t, len(samples))
		}
		pcm := e.pcm[:len(samples)]
		for i, x := range samples {
			pcm[i] = C.int32_t(int16(quantize(x, 1<<15)))
		}
		if C.FLAC__stream_encoder_process_interleaved(e.enc, &pcm[0], C.uint(len(pcm))) == 0 {
			return dst, e.failure("encode")
		}
	}
	return e.drain(dst), nil
}

// Flush encodes what remains (the last block may be short) and appends
// it. Later calls append nothing.
func (e *FLACEncoder) Flush(dst []byte) ([]byte, error) {
	if e.enc == nil {
		return dst, ErrClosed
	}
	if e.ended {
		return dst, nil
	}
	e.ended = true
	if C.FLAC__stream_encoder_finish(e.enc) == 0 {
		return dst, e.failure("finish")
	}
	return e.drain(dst), nil
}

func (e *FLACEncoder) drain(dst []byte) []byte {
	if n := int(e.sink.len); n > 0 {
		dst = append(dst, unsafe.Slice((*byte)(unsafe.Pointer(e.sink.buf)), n)...)
		e.sink.len = 0
	}
	return dst
}

func (e *FLACEncoder) failure(op string) error {
	return fmt.Errorf("codec: flac %s: %s", op, C.GoString(C.FLAC__stream_encoder_get_resolved_state_string(e.enc)))
}

// Close frees the encoder. It is idempotent.
func (e *FLACEncoder) Close() error {
	if e.enc == nil {
		return nil
	}
	C.FLAC__stream_encoder_delete(e.enc) // finishes first if Flush did not
	C.free(unsafe.Pointer(e.sink.buf))
	C.free(unsafe.Pointer(e.sink))
	e.enc, e.sink = nil, nil
	return nil
}
