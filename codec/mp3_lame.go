//go:build !nomp3

package codec

/*
#cgo LDFLAGS: -lmp3lame
#include <lame/lame.h>
#include <stdarg.h>

// lame reports through printf-style callbacks, which cgo cannot define in
// Go; silence them: errors come back as return codes.
static void quiet(const char *format, va_list ap) { (void)format; (void)ap; }

static lame_t newLame(int rate, int kbps, int quality) {
	lame_t l = lame_init();
	if (!l) return NULL;
	lame_set_errorf(l, quiet);
	lame_set_debugf(l, quiet);
	lame_set_msgf(l, quiet);
	lame_set_num_channels(l, 1);
	lame_set_mode(l, MONO);
	lame_set_in_samplerate(l, rate);
	lame_set_out_samplerate(l, rate);
	lame_set_VBR(l, vbr_off);
	lame_set_brate(l, kbps);
	lame_set_quality(l, quality);
	// No Xing/Info frame: it is a placeholder meant to be rewritten at the
	// start of a file, impossible once the stream is on the wire.
	lame_set_bWriteVbrTag(l, 0);
	return l;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// MP3Available reports whether this build links libmp3lame.
const MP3Available = true

// LameError is a negative return code from libmp3lame.
type LameError int

func (e LameError) Error() string {
	switch e {
	case -1:
		return "lame: output buffer too small or generic error"
	case -2, C.LAME_NOMEM:
		return "lame: out of memory"
	case -3:
		return "lame: parameters not initialised"
	case -4:
		return "lame: psycho-acoustic problem"
	case C.LAME_BADBITRATE:
		return "lame: bad bitrate"
	case C.LAME_BADSAMPFREQ:
		return "lame: bad sample rate"
	}
	return fmt.Sprintf("lame: error %d", int(e))
}

// MP3Encoder is a streaming mono CBR MP3 encoder over libmp3lame. Not safe
// for concurrent use; Close frees the C state.
type MP3Encoder struct {
	l C.lame_t
}

// NewMP3Encoder returns an encoder for mono input at rate, which must be
// an MP3 rate (see MP3Rate), at bitrateKbps (0 means DefaultMP3Bitrate).
func NewMP3Encoder(rate, bitrateKbps int) (*MP3Encoder, error) {
	if !isMP3Rate(rate) {
		return nil, fmt.Errorf("codec: %d Hz is not an MP3 sample rate", rate)
	}
	if bitrateKbps == 0 {
		bitrateKbps = DefaultMP3Bitrate
	}
	if !validMP3Bitrate(rate, bitrateKbps) {
		return nil, fmt.Errorf("codec: %d kbit/s is not an MP3 bitrate at %d Hz", bitrateKbps, rate)
	}
	l := C.newLame(C.int(rate), C.int(bitrateKbps), DefaultMP3Quality)
	if l == nil {
		return nil, fmt.Errorf("codec: lame_init: %w", LameError(C.LAME_NOMEM))
	}
	if rc := C.lame_init_params(l); rc < 0 {
		C.lame_close(l)
		return nil, fmt.Errorf("codec: mp3 at %d Hz, %d kbit/s: %w", rate, bitrateKbps, LameError(rc))
	}
	return &MP3Encoder{l: l}, nil
}

// Encode appends the MP3 bytes lame has ready after taking samples (values
// in [-1, 1]) to dst. Lame buffers about a frame, so output may be empty.
func (e *MP3Encoder) Encode(dst []byte, samples []float32) ([]byte, error) {
	if e.l == nil {
		return dst, ErrClosed
	}
	for len(samples) > 0 {
		// Bounded calls keep the worst-case buffer (1.25n + 7200) small.
		n := min(len(samples), 1<<16)
		off := len(dst)
		dst = grow(dst, n+n/4+7200)
		out := dst[off:]
		pcm := (*C.float)(unsafe.Pointer(&samples[0]))
		rc := C.lame_encode_buffer_ieee_float(e.l, pcm, pcm, C.int(n),
			(*C.uchar)(unsafe.Pointer(&out[0])), C.int(len(out)))
		if rc < 0 {
			return dst[:off], fmt.Errorf("codec: mp3 encode: %w", LameError(rc))
		}
		dst = dst[:off+int(rc)]
		samples = samples[n:]
	}
	return dst, nil
}

// Flush pads the last frame, appends the remaining MP3 bytes to dst, and
// ends the stream: only Close may follow.
func (e *MP3Encoder) Flush(dst []byte) ([]byte, error) {
	if e.l == nil {
		return dst, ErrClosed
	}
	off := len(dst)
	dst = grow(dst, 7200)
	out := dst[off:]
	rc := C.lame_encode_flush(e.l, (*C.uchar)(unsafe.Pointer(&out[0])), C.int(len(out)))
	if rc < 0 {
		return dst[:off], fmt.Errorf("codec: mp3 flush: %w", LameError(rc))
	}
	return dst[:off+int(rc)], nil
}

// Close frees the encoder. It is idempotent.
func (e *MP3Encoder) Close() error {
	if e.l != nil {
		C.lame_close(e.l)
		e.l = nil
	}
	return nil
}
