// Package codec converts the engine's float32 mono audio into the formats
// clients ask for (raw PCM, WAV, Opus, MP3), resamples it with libsoxr, and
// decodes uploaded clips back to float32 mono.
package codec

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Format names an output audio format as spelled in the public interface.
type Format string

// The formats of the interface, section 2.5.
const (
	S16LE Format = "s16le"
	S24LE Format = "s24le"
	S32LE Format = "s32le"
	F32LE Format = "f32le"
	F64LE Format = "f64le"
	WAV   Format = "wav"
	Opus  Format = "opus"
	MP3   Format = "mp3"
)

// ParseFormat accepts the exact lower-case names only: the interface is
// case-sensitive and a lenient parser would accept requests that other
// servers in a deployment refuse.
func ParseFormat(s string) (Format, bool) {
	switch f := Format(s); f {
	case S16LE, S24LE, S32LE, F32LE, F64LE, WAV, Opus, MP3:
		return f, true
	}
	return "", false
}

// BytesPerSample is the size of one mono sample for raw PCM formats and 0
// for containers and codecs.
func (f Format) BytesPerSample() int {
	switch f {
	case S16LE:
		return 2
	case S24LE:
		return 3
	case S32LE, F32LE:
		return 4
	case F64LE:
		return 8
	}
	return 0
}

// IsPCM reports whether f is headerless raw PCM.
func (f Format) IsPCM() bool { return f.BytesPerSample() > 0 }

// maxF32 is the largest float32 below 1: f32le output promises [-1, 1).
var maxF32 = math.Nextafter32(1, 0)

// grow extends b by n bytes, reallocating at most once.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// DecodePCM decodes raw PCM bytes of format f to float32 samples. The input
// must hold whole samples.
func DecodePCM(f Format, b []byte) ([]float32, error) {
	n := f.BytesPerSample()
	if n == 0 {
		return nil, fmt.Errorf("%w: %q is not a PCM format", ErrUnknownFormat, f)
	}
	if len(b)%n != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %s samples", ErrCorrupt, len(b), f)
	}
	out := make([]float32, len(b)/n)
	decodeInts(out, b, f)
	return out, nil
}

func decodeInts(out []float32, b []byte, f Format) {
	le := binary.LittleEndian
	for i := range out {
		switch f {
		case S16LE:
			out[i] = float32(int16(le.Uint16(b[2*i:]))) / (1 << 15)
		case S24LE:
			v := int32(uint32(b[3*i])<<8|uint32(b[3*i+1])<<16|uint32(b[3*i+2])<<24) >> 8
			out[i] = float32(v) / (1 << 23)
		case S32LE:
			out[i] = float32(float64(int32(le.Uint32(b[4*i:]))) / (1 << 31))
		case F32LE:
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		case F64LE:
			out[i] = float32(math.Float64frombits(le.Uint64(b[8*i:])))
		}
	}
}
