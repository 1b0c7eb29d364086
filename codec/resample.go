package codec

/*
#cgo pkg-config: soxr
#include <soxr.h>
#include <stdlib.h>

// newSoxr hides the spec structs from Go. The recipe is chosen for streaming
// latency: see the comment on NewResampler.
static soxr_t newSoxr(double in, double out, unsigned long recipe,
                      unsigned log2MinDFT, unsigned log2LargeDFT, char const **err) {
	soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
	soxr_quality_spec_t q = soxr_quality_spec(recipe, 0);
	soxr_runtime_spec_t rt = soxr_runtime_spec(1);
	rt.log2_min_dft_size = log2MinDFT;
	rt.log2_large_dft_size = log2LargeDFT;
	soxr_error_t e = NULL;
	soxr_t s = soxr_create(in, out, 1, &e, &io, &q, &rt);
	*err = e;
	return s;
}

// stepResult returns soxr_process's outputs by value: Go locals passed by
// address to C escape to the heap, an allocation on every chunk.
typedef struct { size_t idone, odone; char const *err; } stepResult;

static stepResult step(soxr_t s, float const *in, size_t ilen, float *out, size_t olen) {
	stepResult r = {0, 0, NULL};
	r.err = soxr_process(s, in, ilen, &r.idone, out, olen, &r.odone);
	return r;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Resampler converts a mono float32 stream between two rates with libsoxr.
// It keeps the filter state between calls, so feeding a signal in chunks
// gives the same output as feeding it whole. Not safe for concurrent use.
type Resampler struct {
	s       C.soxr_t
	in, out int
}

// soxr's default HQ set-up holds back about 50 ms of input before its
// first output: its DFT stage works on blocks sized by log2_large_dft_size
// (default 2^17). With DFT sizes of 2^8 the first 20 ms chunk from
// 22050 Hz yields output at 16000-48000 Hz; from 2^11 up it yields none.
// Measured through the C API on 20 ms chunks at 22050 -> 48000 (best of
// 60 runs, same window): 20-bit HQ 3600x, 16-bit 3830x, default HQ with
// its large DFT 4170x but no output for the first chunk; the DFT size
// between 2^8 and 2^10 makes no difference, and min-phase, intermediate
// phase and forced coefficient interpolation are all slower.
//
// So the recipe is SOXR_16_BITQ: the same passband (0.913 of Nyquist,
// rolloff <= 0.01 dB) and linear phase as HQ, with stopband and
// precision at 16 bits instead of 20. espeak-ng renders 16-bit samples,
// so its noise floor is already at -96 dB and the extra 4 bits bought
// nothing but filter length; the shorter filter also lets the first chunk
// through sooner (742 samples at 48 kHz instead of 663).
//
// Downsampling below ~0.6x (to 8000-12000 Hz) makes soxr add a decimation
// stage that holds the first chunk back at any precision; there the LQ
// recipe keeps the first chunk flowing, at the price of a passband ending
// near 0.8 of Nyquist (3 kHz flat at 8000 Hz: telephone band, -8 dB at
// 3.4 kHz).
//
// There is no separate low-latency flag in libsoxr 0.1.3: latency comes
// from the phase response and the DFT block size only.
const (
	resampleMinDFT   = 8
	resampleLargeDFT = 8
)

// Recipes, for the benchmark that compares them.
const (
	recipeQQ    = C.SOXR_QQ
	recipeLQ    = C.SOXR_LQ
	recipeMQ    = C.SOXR_MQ
	recipe16Bit = C.SOXR_16_BITQ
	recipeHQ    = C.SOXR_HQ
)

func resampleRecipe(inRate, outRate int) C.ulong {
	if 10*outRate < 6*inRate {
		return C.SOXR_LQ
	}
	return C.SOXR_16_BITQ
}

// NewResampler returns a streaming resampler from inRate to outRate (Hz).
func NewResampler(inRate, outRate int) (*Resampler, error) {
	if inRate <= 0 || outRate <= 0 || inRate > 1<<20 || outRate > 1<<20 {
		return nil, fmt.Errorf("codec: resample %d -> %d Hz: rates must be in 1..1048576", inRate, outRate)
	}
	return newResampler(inRate, outRate, resampleRecipe(inRate, outRate), resampleMinDFT, resampleLargeDFT)
}

func newResampler(inRate, outRate int, recipe C.ulong, minDFT, largeDFT C.uint) (*Resampler, error) {
	var cerr *C.char
	s := C.newSoxr(C.double(inRate), C.double(outRate), recipe, minDFT, largeDFT, &cerr)
	if cerr != nil {
		if s != nil {
			C.soxr_delete(s)
		}
		return nil, fmt.Errorf("codec: soxr_create %d -> %d Hz: %s", inRate, outRate, C.GoString(cerr))
	}
	return &Resampler{s: s, in: inRate, out: outRate}, nil
}

// Process resamples in and appends the output to dst. Output can lag input
// by the filter delay; Flush returns the tail.
func (r *Resampler) Process(dst, in []float32) ([]float32, error) {
	if r.s == nil {
		return dst, ErrClosed
	}
	if len(in) == 0 {
		// soxr reads a NULL input as end of stream: never pass one here.
		return dst, nil
	}
	for len(in) > 0 {
		var idone int
		var err error
		dst, idone, err = r.step(dst, unsafe.Pointer(&in[0]), len(in))
		if err != nil {
			return dst, err
		}
		in = in[idone:]
	}
	return dst, nil
}

// Flush drains the filter at end of stream and appends the tail to dst.
// The resampler is spent afterwards; Close it.
func (r *Resampler) Flush(dst []float32) ([]float32, error) {
	if r.s == nil {
		return dst, ErrClosed
	}
	for {
		n, space := len(dst), 0
		var err error
		if dst, space, err = r.step(dst, nil, 0); err != nil {
			return dst, err
		}
		if len(dst)-n < space { // soxr had less to give than we had room for
			return dst, nil
		}
	}
}

// chunkOut sizes the output space for n input samples, with room for what
// soxr may still hold from earlier calls.
func (r *Resampler) chunkOut(n int) int {
	return n*r.out/r.in + 1024
}

// step runs one soxr_process call into dst's spare capacity. It returns
// the input consumed for Process, and the output room offered for Flush.
func (r *Resampler) step(dst []float32, in unsafe.Pointer, n int) ([]float32, int, error) {
	want := r.chunkOut(n)
	if cap(dst)-len(dst) < want {
		nd := make([]float32, len(dst), 2*cap(dst)+want)
		copy(nd, dst)
		dst = nd
	}
	out := dst[len(dst):cap(dst)]
	res := C.step(r.s, (*C.float)(in), C.size_t(n), (*C.float)(unsafe.Pointer(&out[0])), C.size_t(len(out)))
	if res.err != nil {
		return dst, 0, fmt.Errorf("codec: soxr_process: %s", C.GoString(res.err))
	}
	idone, odone := res.idone, res.odone
	if in == nil {
		return dst[:len(dst)+int(odone)], len(out), nil
	}
	return dst[:len(dst)+int(odone)], int(idone), nil
}

// Delay reports the samples (at the output rate) held inside the filter.
func (r *Resampler) Delay() float64 {
	if r.s == nil {
		return 0
	}
	return float64(C.soxr_delay(r.s))
}

// Close frees the C state. It is idempotent.
func (r *Resampler) Close() error {
	if r.s != nil {
		C.soxr_delete(r.s)
		r.s = nil
	}
	return nil
}

// C types for the recipe benchmark (test files cannot use cgo).
type (
	cULong = C.ulong
	cUInt  = C.uint
)
