package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
)

// streamingSize marks RIFF and data sizes as unknown in a streaming header;
// readers that honour it (ours, sox, ffmpeg) read the data to end of file.
const streamingSize = 0xFFFFFFFF

const (
	wavFormatPCM        = 1
	wavFormatFloat      = 3
	wavFormatALaw       = 6
	wavFormatMuLaw      = 7
	wavFormatExtensible = 0xFFFE
)

// AppendWAVHeader appends a 44-byte canonical mono WAV header. With
// dataLen < 0 the sizes are 0xFFFFFFFF, for a stream whose length is not
// known when the header goes out.
func AppendWAVHeader(dst []byte, rate, bitsPerSample int, float bool, dataLen int) []byte {
	tag := uint16(wavFormatPCM)
	if float {
		tag = wavFormatFloat
	}
	return appendWAVHeader(dst, tag, rate, bitsPerSample, dataLen)
}

// AppendG711WAVHeader appends the 44-byte mono WAV header of f's samples
// (MuLaw or ALaw, 8 bits each: format tags 7 and 6), dataLen bytes of
// them (< 0: unknown, as AppendWAVHeader). It reports false for other
// formats. A dialect whose clients expect telephony audio in a WAV file
// (Deepgram's default container for mulaw and alaw) puts it in front of
// the raw samples.
func AppendG711WAVHeader(dst []byte, f Format, rate, dataLen int) ([]byte, bool) {
	switch f {
	case MuLaw:
		return appendWAVHeader(dst, wavFormatMuLaw, rate, 8, dataLen), true
	case ALaw:
		return appendWAVHeader(dst, wavFormatALaw, rate, 8, dataLen), true
	}
	return dst, false
}

func appendWAVHeader(dst []byte, tag uint16, rate, bitsPerSample int, dataLen int) []byte {
	riff, data := uint32(streamingSize), uint32(streamingSize)
	if dataLen >= 0 {
		riff, data = uint32(36+dataLen), uint32(dataLen)
	}
	blockAlign := bitsPerSample / 8
	le := binary.LittleEndian
	dst = append(dst, "RIFF"...)
	dst = le.AppendUint32(dst, riff)
	dst = append(dst, "WAVEfmt "...)
	dst = le.AppendUint32(dst, 16)
	dst = le.AppendUint16(dst, tag)
	dst = le.AppendUint16(dst, 1) // mono
	dst = le.AppendUint32(dst, uint32(rate))
	dst = le.AppendUint32(dst, uint32(rate*blockAlign))
	dst = le.AppendUint16(dst, uint16(blockAlign))
	dst = le.AppendUint16(dst, uint16(bitsPerSample))
	dst = append(dst, "data"...)
	return le.AppendUint32(dst, data)
}

// wavFmt is the part of the fmt chunk the reader needs.
type wavFmt struct {
	tag      uint16
	channels int
	rate     int
	bits     int
}

// maxWAVChannels bounds the mixdown; WAVE_FORMAT_EXTENSIBLE names 18
// speaker positions, anything far beyond is garbage.
const maxWAVChannels = 64

// ReadWAV reads a whole WAV stream and mixes it to mono float32. Unknown
// chunks are skipped; a data chunk shorter than declared (a truncated upload
// or a streaming header) yields the whole frames present.
func ReadWAV(r io.Reader) (samples []float32, rate int, err error) {
	var hdr [12]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, 0, fmt.Errorf("%w: short WAV header", ErrUnknownFormat)
	}
	if string(hdr[0:4]) != "RIFF" || string(hdr[8:12]) != "WAVE" {
		return nil, 0, fmt.Errorf("%w: not a RIFF/WAVE stream", ErrUnknownFormat)
	}
	var f *wavFmt
	for {
		id, size, err := readChunkHeader(r)
		if err != nil {
			return nil, 0, err
		}
		switch id {
		case "fmt ":
			if f, err = readFmt(r, size); err != nil {
				return nil, 0, err
			}
		case "data":
			if f == nil {
				return nil, 0, fmt.Errorf("%w: WAV data chunk before fmt chunk", ErrCorrupt)
			}
			s, err := readWAVData(r, size, f)
			return s, f.rate, err
		default:
			if err := skip(r, int64(size)+int64(size&1)); err != nil {
				return nil, 0, err
			}
		}
	}
}

func readChunkHeader(r io.Reader) (string, uint32, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", 0, fmt.Errorf("%w: WAV without a data chunk", ErrCorrupt)
	}
	return string(h[:4]), binary.LittleEndian.Uint32(h[4:]), nil
}

func skip(r io.Reader, n int64) error {
	if _, err := io.CopyN(io.Discard, r, n); err != nil {
		return fmt.Errorf("%w: truncated WAV chunk", ErrCorrupt)
	}
	return nil
}

func readFmt(r io.Reader, size uint32) (*wavFmt, error) {
	if size < 16 || size > 1024 {
		return nil, fmt.Errorf("%w: WAV fmt chunk of %d bytes", ErrCorrupt, size)
	}
	b := make([]byte, size+size&1)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: truncated WAV fmt chunk", ErrCorrupt)
	}
	le := binary.LittleEndian
	f := &wavFmt{
		tag:      le.Uint16(b[0:]),
		channels: int(le.Uint16(b[2:])),
		rate:     int(le.Uint32(b[4:])),
		bits:     int(le.Uint16(b[14:])),
	}
	if f.tag == wavFormatExtensible {
		// cbSize(2) validBits(2) channelMask(4) then the sub-format GUID,
		// whose first two bytes are the plain format tag.
		if size < 40 {
			return nil, fmt.Errorf("%w: short WAVE_FORMAT_EXTENSIBLE", ErrCorrupt)
		}
		f.tag = le.Uint16(b[24:])
	}
	return f, f.validate()
}

func (f *wavFmt) validate() error {
	if f.channels < 1 || f.channels > maxWAVChannels {
		return fmt.Errorf("%w: WAV with %d channels", ErrCorrupt, f.channels)
	}
	if f.rate < 1 || f.rate > 1<<20 {
		return fmt.Errorf("%w: WAV rate %d", ErrCorrupt, f.rate)
	}
	switch {
	case f.tag == wavFormatPCM && (f.bits == 8 || f.bits == 16 || f.bits == 24 || f.bits == 32):
	case f.tag == wavFormatFloat && (f.bits == 32 || f.bits == 64):
	case (f.tag == wavFormatMuLaw || f.tag == wavFormatALaw) && f.bits == 8:
	default:
		return fmt.Errorf("%w: WAV encoding tag %#x with %d bits", ErrUnknownFormat, f.tag, f.bits)
	}
	return nil
}

// readWAVData reads up to size bytes (all remaining for a streaming size)
// and mixes whole frames down to mono. io.ReadAll grows with what is
// actually there, so a lying size cannot force a huge allocation.
func readWAVData(r io.Reader, size uint32, f *wavFmt) ([]float32, error) {
	lr := r
	if size != streamingSize {
		lr = io.LimitReader(r, int64(size))
	}
	b, err := io.ReadAll(io.LimitReader(lr, maxWAVBytes+1))
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("codec: reading WAV data: %w", err)
	}
	if len(b) > maxWAVBytes {
		return nil, fmt.Errorf("%w: WAV data over %d bytes", ErrTooLong, maxWAVBytes)
	}
	bps := f.bits / 8
	frame := bps * f.channels
	out := make([]float32, len(b)/frame)
	scale := 1 / float32(f.channels)
	for i := range out {
		var sum float32
		for c := 0; c < f.channels; c++ {
			sum += wavSample(b[i*frame+c*bps:], f)
		}
		out[i] = sum * scale
	}
	return out, nil
}

// maxWAVBytes bounds memory for one clip (an hour of 16-bit mono at 48 kHz
// is 345 MB; uploads are far smaller).
const maxWAVBytes = 512 << 20

func wavSample(b []byte, f *wavFmt) float32 {
	le := binary.LittleEndian
	switch {
	case f.tag == wavFormatMuLaw:
		return muLawFloat[b[0]]
	case f.tag == wavFormatALaw:
		return aLawFloat[b[0]]
	case f.bits == 8: // the only unsigned width
		return (float32(b[0]) - 128) / 128
	case f.bits == 16:
		return float32(int16(le.Uint16(b))) / (1 << 15)
	case f.bits == 24:
		v := int32(uint32(b[0])<<8|uint32(b[1])<<16|uint32(b[2])<<24) >> 8
		return float32(v) / (1 << 23)
	case f.tag == wavFormatFloat && f.bits == 32:
		return sanitize(math.Float32frombits(le.Uint32(b)))
	case f.bits == 32:
		return float32(float64(int32(le.Uint32(b))) / (1 << 31))
	default: // float 64
		return sanitize(float32(math.Float64frombits(le.Uint64(b))))
	}
}

// sanitize keeps NaN and infinities from uploaded float files out of the
// signal chain, where they would poison filters downstream.
func sanitize(x float32) float32 {
	if x != x || x > math.MaxFloat32 || x < -math.MaxFloat32 {
		return 0
	}
	return x
}

// wavEncoder streams a 16-bit mono WAV: the header (sizes unknown) in front
// of the first unit, then s16le. A stream without audio still gets the
// header, from Flush, so the client always receives a valid file.
type wavEncoder struct {
	closed bool // pooled: a second Close must not pool it twice
	rate   int
	header bool // sent
	out    []byte
}

func newWAVEncoder(c EncoderConfig) (Encoder, error) {
	e := wavEncoders.Get().(*wavEncoder)
	e.closed, e.rate, e.header, e.out = false, c.Rate, false, e.out[:0]
	return e, nil
}

var wavEncoders = sync.Pool{New: func() any { return new(wavEncoder) }}

func (e *wavEncoder) Write(samples []float32, emit func([]byte) error) error {
	e.out = e.out[:0]
	if !e.header {
		e.header = true
		e.out = AppendWAVHeader(e.out, e.rate, 16, false, -1)
	}
	off := len(e.out)
	e.out = grow(e.out, 2*len(samples))
	putS16(e.out[off:], samples)
	return emitNonEmpty(e.out, emit)
}

func (e *wavEncoder) Flush(emit func([]byte) error) error {
	if e.header {
		return nil
	}
	return e.Write(nil, emit)
}

func (e *wavEncoder) Close() error {
	if !e.closed {
		e.closed = true
		wavEncoders.Put(e)
	}
	return nil
}
