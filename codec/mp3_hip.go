//go:build !nomp3

package codec

/*
#cgo LDFLAGS: -lmp3lame
#include <lame/lame.h>
#include <stdarg.h>
#include <string.h>

// hip reports bitstream problems through printf-style callbacks, which
// would print to stderr for every broken upload; errors come back as
// return codes instead.
static void hipQuiet(const char *format, va_list ap) { (void)format; (void)ap; }

static hip_t newHip(void) {
	hip_t h = hip_decode_init();
	if (h) {
		hip_set_errorf(h, hipQuiet);
		hip_set_debugf(h, hipQuiet);
		hip_set_msgf(h, hipQuiet);
	}
	return h;
}

// hipFrame returns one decode step by value: Go locals passed to C by
// address would escape to the heap.
typedef struct { int n, rate, channels, delay, padding; } hipFrame;

// hipStep feeds len bytes (0: none, just drain what hip holds) and decodes
// at most one frame into l and r, which must hold hipMaxFrame samples.
static hipFrame hipStep(hip_t h, unsigned char *buf, size_t len, short *l, short *r) {
	static unsigned char none;
	mp3data_struct m;
	hipFrame f = {0, 0, 0, -1, -1};
	memset(&m, 0, sizeof m);
	f.n = hip_decode1_headersB(h, len ? buf : &none, len, l, r, &m, &f.delay, &f.padding);
	if (m.header_parsed) {
		f.rate = m.samplerate;
		f.channels = m.stereo;
	}
	return f;
}
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// DecodeClip's MP3 path uses LAME's own decoder (hip, from mpglib) through
// the libmp3lame we already link for encoding. go-mp3 decoded some
// 22.05 kHz (MPEG-2) files badly: the cloning engineer measured voice
// quality 10 dB against 17 dB for sox's decode of the same file, enough to
// fail some clips as unusable. On espeak-ng speech through lame at 22050
// Hz (TestDecodeMP3Speech22k): at 64 kbit/s both decode alike (23 dB
// SNR), at 32 kbit/s go-mp3 gives noise (correlation 0.33, -3.6 dB) where
// hip gives 0.99 and 17 dB. hip also honours the LAME tag's delay and
// padding, so clips line up with their source. go-mp3 stays for builds
// without libmp3lame (tag nomp3) and in tests, as an independent check of
// our encoder.

const (
	// hipMaxFrame bounds the samples one hip_decode1 call writes per
	// channel: a layer I/II/III frame holds at most 1152. The buffers are
	// four times that, so a misparsed frame cannot write past them.
	hipMaxFrame = 4 * 1152
	// hipFeed is the input handed to hip per call: mpglib copies what it
	// is given, so feeding in slices keeps its copy small.
	hipFeed = 16 << 10
	// hipDecoderDelay is mpglib's own delay (528 samples of the synthesis
	// filterbank plus one), which the LAME tag's encoder delay does not
	// include.
	hipDecoderDelay = 528 + 1
	// hipTailZeros is how many empty answers in a row end the stream.
	hipTailZeros = 8
)

// hipMu serialises hip decoders: mpglib fills its global tables on the
// first decoder initialisation behind an unsynchronised static flag, so
// two first decodes at once could read half-built tables. Uploads are rare
// and decode in milliseconds, so serialising costs nothing that matters.
var hipMu sync.Mutex

func decodeMP3Clip(data []byte) ([]float32, int, error) { return decodeMP3Hip(data) }

func decodeMP3Hip(data []byte) ([]float32, int, error) {
	hipMu.Lock()
	defer hipMu.Unlock()
	h := C.newHip()
	if h == nil {
		return nil, 0, fmt.Errorf("codec: hip_decode_init failed")
	}
	defer C.hip_decode_exit(h)

	data = mp3Frames(data)
	var l, r [hipMaxFrame]C.short
	var out []float32
	rate, delay, padding := 0, -1, -1
	// frame mixes one decoded frame to mono and checks it.
	frame := func(f C.hipFrame) error {
		n, ch := int(f.n), int(f.channels)
		if f.delay >= 0 && delay < 0 {
			delay, padding = int(f.delay), int(f.padding)
		}
		switch {
		case n > hipMaxFrame || ch < 1 || ch > 2 || f.rate <= 0:
			return fmt.Errorf("%w: mp3 frame of %d samples, %d channels at %d Hz", ErrCorrupt, n, ch, int(f.rate))
		case rate != 0 && int(f.rate) != rate:
			return fmt.Errorf("%w: mp3 rate changes from %d to %d Hz", ErrCorrupt, rate, int(f.rate))
		}
		rate = int(f.rate)
		if ch == 1 {
			for _, v := range l[:n] {
				out = append(out, float32(v)/(1<<15))
			}
		} else {
			for i, v := range l[:n] {
				out = append(out, (float32(v)+float32(r[i]))/(2<<15))
			}
		}
		if len(out) > MaxClipSamples {
			return ErrTooLong
		}
		return nil
	}
	for off := 0; off < len(data); {
		chunk := data[off:min(off+hipFeed, len(data))]
		off += len(chunk)
		// One call takes the chunk; further calls with no input drain the
		// frames it completed, one per call, until hip returns 0.
		f := C.hipStep(h, (*C.uchar)(unsafe.Pointer(&chunk[0])), C.size_t(len(chunk)), &l[0], &r[0])
		for f.n > 0 {
			if err := frame(f); err != nil {
				return nil, 0, err
			}
			f = C.hipStep(h, nil, 0, &l[0], &r[0])
		}
		// f.n < 0 is a frame hip could not decode: it resyncs on the next
		// header by itself, as players do, so the clip keeps the frames
		// around it. Input with no decodable frame at all fails below.
	}
	// A 0 does not always mean hip holds nothing: it also answers for a
	// frame that yields no samples (the LAME tag frame, a frame whose bit
	// reservoir is missing), with more frames behind it. Measured on a
	// lame file fed whole: 0, 0, then its frames. So at the end drain until
	// several zeros in a row; each output consumes a frame, so this ends.
	for zeros := 0; zeros < hipTailZeros; {
		f := C.hipStep(h, nil, 0, &l[0], &r[0])
		switch {
		case f.n <= 0:
			zeros++
		default:
			zeros = 0
			if err := frame(f); err != nil {
				return nil, 0, err
			}
		}
	}
	if len(out) == 0 || rate == 0 {
		return nil, 0, fmt.Errorf("%w: mp3 without audio frames", ErrCorrupt)
	}
	return trimGapless(out, delay, padding), rate, nil
}

// mp3Frames returns the part of an MP3 file that hip should see. hip
// decodes bare MPEG audio frames only (lame's own front end strips tags
// before calling it): fed an ID3v2 tag it takes the tag's bytes for layer
// I frames and fails on them. So skip ID3v2 tags (header, syncsafe size,
// optional footer), then anything before the first layer III header (the
// only layer sniff accepts), and drop a trailing 128-byte ID3v1 tag.
func mp3Frames(b []byte) []byte {
	for len(b) >= 10 && string(b[:3]) == "ID3" {
		n := 10 + int(b[6]&0x7F)<<21 | int(b[7]&0x7F)<<14 | int(b[8]&0x7F)<<7 | int(b[9]&0x7F)
		if b[5]&0x10 != 0 {
			n += 10
		}
		if n > len(b) {
			return nil
		}
		b = b[n:]
	}
	i := 0
	for i+4 <= len(b) && !isMP3Header(b[i:]) {
		i++
	}
	if b = b[i:]; len(b) < 4 {
		return nil
	}
	if len(b) >= 128 && string(b[len(b)-128:len(b)-125]) == "TAG" {
		b = b[:len(b)-128]
	}
	return b
}

// trimGapless removes the encoder and decoder delay at the start and the
// padding at the end when the file's LAME tag records them, so the clip
// lines up with what was encoded (as sox and lame --decode give it).
// Without a tag (delay < 0) the samples stay as decoded.
func trimGapless(s []float32, delay, padding int) []float32 {
	if delay < 0 {
		return s
	}
	start := delay + hipDecoderDelay
	end := len(s) - max(padding-hipDecoderDelay, 0)
	if start >= end {
		return s // a tag that does not fit the audio: keep everything
	}
	return s[start:end]
}
