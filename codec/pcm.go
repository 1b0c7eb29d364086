package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"unsafe"
)

// AppendPCM appends samples encoded as the raw format f (linear PCM or
// G.711) to dst and returns the extended slice. Values are clipped to
// [-1, 1). It panics if f is not a raw format: that is a programming error,
// Pipeline checks first.
//
// Every byte of output passes through here, so the loops are written for
// speed (issue 3 asks for 20,000x real time): dst grows once to its final
// length, the integer formats pack several samples into one 64-bit store,
// and clipping, rounding edge cases and NaN leave the loop through a single
// well-predicted branch per sample (quantize handles them exactly).
func AppendPCM(dst []byte, f Format, samples []float32) []byte {
	spec := lookup(f)
	if spec == nil || spec.put == nil {
		panic(fmt.Sprintf("codec: AppendPCM with non-PCM format %q", f))
	}
	off := len(dst)
	dst = grow(dst, spec.BytesPerSample*len(samples))
	spec.put(dst[off:], samples)
	return dst
}

// pcmEncoder is the Encoder of every raw format: its registry entry's put
// into one reused buffer, the whole chunk in one unit.
type pcmEncoder struct {
	n   int // bytes per sample
	put func(out []byte, s []float32)
	out []byte
}

func newPCMEncoder(c EncoderConfig) (Encoder, error) {
	spec := lookup(c.Format)
	if spec == nil || spec.put == nil {
		return nil, fmt.Errorf("%w: %q is not a PCM format", ErrUnknownFormat, c.Format)
	}
	e := pcmEncoders.Get().(*pcmEncoder)
	e.n, e.put, e.out = spec.BytesPerSample, spec.put, e.out[:0]
	return e, nil
}

// pcmEncoders and wavEncoders are reused across streams: every one-shot
// speak makes a pipeline, and a pooled encoder comes with its output
// buffer already grown (one allocation less per request, and none for the
// buffer). Close puts one back; Pipeline.Close closes once.
var pcmEncoders = sync.Pool{New: func() any { return new(pcmEncoder) }}

func (e *pcmEncoder) Write(samples []float32, emit func([]byte) error) error {
	e.out = grow(e.out[:0], e.n*len(samples))
	e.put(e.out, samples)
	return emitNonEmpty(e.out, emit)
}

func (e *pcmEncoder) Flush(func([]byte) error) error { return nil }
func (e *pcmEncoder) Close() error {
	if e.put != nil { // a second Close must not pool it twice
		e.put = nil
		pcmEncoders.Put(e)
	}
	return nil
}

// getS16 to getF64 decode whole little-endian samples (DecodePCM).
func getS16(out []float32, b []byte) {
	for i := range out {
		out[i] = float32(int16(binary.LittleEndian.Uint16(b[2*i:]))) / (1 << 15)
	}
}

func getS24(out []float32, b []byte) {
	for i := range out {
		v := int32(uint32(b[3*i])<<8|uint32(b[3*i+1])<<16|uint32(b[3*i+2])<<24) >> 8
		out[i] = float32(v) / (1 << 23)
	}
}

func getS32(out []float32, b []byte) {
	for i := range out {
		out[i] = float32(float64(int32(binary.LittleEndian.Uint32(b[4*i:]))) / (1 << 31))
	}
}

func getF32(out []float32, b []byte) {
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

func getF64(out []float32, b []byte) {
	for i := range out {
		out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:])))
	}
}

// quantize maps x to a signed integer of the given full scale, rounding to
// nearest (halves up) and clipping to [-scale, scale-1]. It works in float64
// so that 32-bit output keeps all of float32's 24 bits of mantissa, and
// floors by offsetting into the positive range, where conversion truncates
// toward zero, which is cheaper than math.Floor. The put loops inline the
// same arithmetic for in-range samples and call this only for the rest.
func quantize(x float32, scale float64) int64 {
	v := float64(x)*scale + (scale + 0.5)
	switch {
	case v >= 2*scale:
		return int64(scale) - 1
	case v >= 0.5:
		return int64(v) - int64(scale)
	case v < 0.5:
		return -int64(scale)
	}
	return 0 // NaN: silence is the only safe value
}

// Below these magnitudes a sample rounds to a code inside the format's
// range, so no clipping is needed: |x| < (scale-0.5)/scale, which for
// 16 and 24 bits is a float32 exactly, and for 32 bits holds for every
// float32 below 1 (the largest, 1-2^-24, rounds to 2^31-128).
const (
	fast16 float32 = 1 - 1.0/(1<<16)
	fast24 float32 = 1 - 1.0/(1<<24)
	fast32 float32 = 1
)

// o16, o24 and o32 are quantize without the clipping, for samples known
// to be in range, as offset binary: the code plus 2^(bits-1), in
// [0, 2^bits). The put loops pack them and flip the sign bits of a whole
// word with one XOR, which turns offset binary into two's complement. They
// are small enough to be inlined, which a version with the slow path is
// not (a call per sample costs more than the arithmetic).
func o16(x float32) uint64 { return uint64(int64(float64(x)*(1<<15) + (1<<15 + 0.5))) }
func o24(x float32) uint64 { return uint64(int64(float64(x)*(1<<23) + (1<<23 + 0.5))) }
func o32(x float32) uint64 { return uint64(int64(float64(x)*(1<<31) + (1<<31 + 0.5))) }

// in4 reports whether four samples are all below the fast limit. It
// compares the magnitudes' bit patterns as integers, which orders them like
// the floats and lets max compile to conditional moves; NaN's pattern is
// above any limit. The caller's check len(s) >= 4 drops the bounds checks.
func in4(s []float32, lim float32) bool {
	const mag = 1<<31 - 1
	m := max(math.Float32bits(s[0])&mag, math.Float32bits(s[1])&mag,
		math.Float32bits(s[2])&mag, math.Float32bits(s[3])&mag)
	return m < math.Float32bits(lim)
}

// q is quantize as a packed code, for the groups with a sample out of
// range and for the tails.
func q(x float32, scale float64) uint64 { return uint64(quantize(x, scale)) }

// putS16 packs four samples per 64-bit store; the tail goes one by one.
func putS16(out []byte, s []float32) {
	out = out[:2*len(s)]
	for len(s) >= 4 && len(out) >= 8 {
		var w uint64
		if in4(s, fast16) {
			w = (o16(s[0]) | o16(s[1])<<16 | o16(s[2])<<32 | o16(s[3])<<48) ^ 0x8000_8000_8000_8000
		} else {
			const m = 0xFFFF
			w = q(s[0], 1<<15)&m | q(s[1], 1<<15)&m<<16 | q(s[2], 1<<15)&m<<32 | q(s[3], 1<<15)<<48
		}
		binary.LittleEndian.PutUint64(out, w)
		s, out = s[4:], out[8:]
	}
	for i, x := range s {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(quantize(x, 1<<15)))
	}
}

// putS24 packs four 3-byte samples into one 8-byte and one 4-byte store.
func putS24(out []byte, s []float32) {
	out = out[:3*len(s)]
	for len(s) >= 4 && len(out) >= 12 {
		var w0, w1 uint64
		if in4(s, fast24) {
			a, b, c, d := o24(s[0]), o24(s[1]), o24(s[2]), o24(s[3])
			// Sign bits: a's 23, b's 47, c's 71 (bit 7 of w1), d's 31 of w1.
			w0 = (a | b<<24 | c<<48) ^ (1<<23 | 1<<47)
			w1 = (c>>16 | d<<8) ^ (1<<7 | 1<<31)
		} else {
			const m = 0xFFFFFF
			a, b, c, d := q(s[0], 1<<23)&m, q(s[1], 1<<23)&m, q(s[2], 1<<23)&m, q(s[3], 1<<23)&m
			w0, w1 = a|b<<24|c<<48, c>>16|d<<8
		}
		binary.LittleEndian.PutUint64(out, w0)
		binary.LittleEndian.PutUint32(out[8:], uint32(w1))
		s, out = s[4:], out[12:]
	}
	for i, x := range s {
		v := quantize(x, 1<<23)
		out[3*i] = byte(v)
		out[3*i+1] = byte(v >> 8)
		out[3*i+2] = byte(v >> 16)
	}
}

// putS32 packs two samples per 64-bit store, four per range check.
func putS32(out []byte, s []float32) {
	out = out[:4*len(s)]
	for len(s) >= 4 && len(out) >= 16 {
		if in4(s, fast32) {
			const sign = 0x8000_0000_8000_0000
			binary.LittleEndian.PutUint64(out, (o32(s[0])|o32(s[1])<<32)^sign)
			binary.LittleEndian.PutUint64(out[8:], (o32(s[2])|o32(s[3])<<32)^sign)
		} else {
			for i := range 4 {
				binary.LittleEndian.PutUint32(out[4*i:], uint32(quantize(s[i], 1<<31)))
			}
		}
		s, out = s[4:], out[16:]
	}
	for i, x := range s {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(quantize(x, 1<<31)))
	}
}

// nativeLE: f32le output is then the in-memory layout of []float32.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// putF32 copies the samples as they are, then clips in place the rare ones
// out of range. The copy goes through a []float32 view of out, which is
// only valid on a little-endian machine and for a 4-byte aligned out (an
// unaligned *float32 breaks Go's pointer rules, and checkptr in -race
// builds says so); otherwise the portable loop runs.
func putF32(out []byte, s []float32) {
	if len(s) == 0 {
		return
	}
	if !nativeLE || uintptr(unsafe.Pointer(&out[0]))%4 != 0 {
		out = out[:4*len(s)]
		for i, x := range s {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(clipF32(x)))
		}
		return
	}
	view := unsafe.Slice((*float32)(unsafe.Pointer(&out[0])), len(s))
	copy(view, s)
	for i, x := range view {
		if !(x >= -1 && x <= maxF32) { // NaN fails too
			view[i] = clipF32(x)
		}
	}
}

// putF64 converts four in-range samples per check; float32 to float64 is
// exact, so only clipping needs the slow path.
func putF64(out []byte, s []float32) {
	out = out[:8*len(s)]
	for len(s) >= 4 && len(out) >= 32 {
		if in4(s, 1) { // -1 itself takes the slow path, which keeps it
			binary.LittleEndian.PutUint64(out, math.Float64bits(float64(s[0])))
			binary.LittleEndian.PutUint64(out[8:], math.Float64bits(float64(s[1])))
			binary.LittleEndian.PutUint64(out[16:], math.Float64bits(float64(s[2])))
			binary.LittleEndian.PutUint64(out[24:], math.Float64bits(float64(s[3])))
		} else {
			for i := range 4 {
				binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(float64(clipF32(s[i]))))
			}
		}
		s, out = s[4:], out[32:]
	}
	for i, x := range s {
		binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(float64(clipF32(x))))
	}
}

func clipF32(x float32) float32 {
	switch {
	case x != x:
		return 0
	case x > maxF32:
		return maxF32
	case x < -1:
		return -1
	}
	return x
}
