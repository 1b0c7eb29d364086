package codec

import "fmt"

// Pipeline is the per-stream converter every transport uses: float32 mono
// at the engine's rate in, bytes of the client's format out. It owns its
// buffers and reuses them, so the hot path does not allocate once warm.
// Not safe for concurrent use.
type Pipeline struct {
	format  Format
	rate    int
	rs      *Resampler // nil when no rate change is needed
	opus    *OpusPacketizer
	ogg     *OggOpusWriter
	flac    *FLACEncoder
	mp3     *MP3Encoder
	header  bool // WAV header still to send
	flushed bool // the stream has ended: encoders are spent
	closed  bool
	samples []float32 // resampled audio, reused
	out     []byte    // encoded bytes, reused
}

// NewPipeline converts from inRate to format f at outRate. WAV streams a
// 16-bit header (sizes unknown) then s16le; mu-law and A-law are raw like
// s16le, one byte per sample; Opus and Ogg Opus always run at 48 kHz (the
// Ogg header records inRate as the input rate); MP3 runs at
// MP3Rate(outRate); FLAC is 16-bit at outRate. Rate reports the effective
// rate.
func NewPipeline(inRate int, f Format, outRate int) (*Pipeline, error) {
	if inRate <= 0 || outRate <= 0 {
		return nil, fmt.Errorf("codec: pipeline %d -> %d Hz: rates must be positive", inRate, outRate)
	}
	p := &Pipeline{format: f, rate: outRate}
	var err error
	switch {
	case f.IsPCM():
	case f == WAV:
		p.header = true
	case f == Opus:
		p.rate = OpusRate
		p.opus, err = NewOpusPacketizer(0)
	case f == OggOpus:
		p.rate = OpusRate
		p.ogg, err = NewOggOpusWriter(inRate, 0)
	case f == FLAC:
		p.flac, err = NewFLACEncoder(outRate)
	case f == MP3:
		p.rate = MP3Rate(outRate)
		p.mp3, err = NewMP3Encoder(p.rate, 0)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownFormat, f)
	}
	if err == nil && p.rate != inRate {
		p.rs, err = NewResampler(inRate, p.rate)
	}
	if err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Rate is the effective output sample rate.
func (p *Pipeline) Rate() int { return p.rate }

// Format is the output format.
func (p *Pipeline) Format() Format { return p.format }

// Write converts samples and passes the result to emit in whole units:
// raw bytes of whole samples, one Opus packet per call, whole Ogg pages,
// whole FLAC frames (the first call also the stream header), or MP3 bytes. The
// slice given to emit is only valid during the call. An error from emit is
// returned as is, and the stream should then be abandoned.
func (p *Pipeline) Write(samples []float32, emit func(b []byte) error) error {
	if p.closed {
		return ErrClosed
	}
	if p.flushed {
		return fmt.Errorf("%w: Write after Flush", ErrClosed)
	}
	if p.rs != nil {
		var err error
		if p.samples, err = p.rs.Process(p.samples[:0], samples); err != nil {
			return err
		}
		samples = p.samples
	}
	return p.encode(samples, emit)
}

// Flush drains the resampler and the encoder at the end of the stream.
// Later calls do nothing: LAME and soxr must be drained exactly once.
func (p *Pipeline) Flush(emit func(b []byte) error) error {
	if p.closed {
		return ErrClosed
	}
	if p.flushed {
		return nil
	}
	p.flushed = true
	if p.rs != nil {
		var err error
		if p.samples, err = p.rs.Flush(p.samples[:0]); err != nil {
			return err
		}
		if err := p.encode(p.samples, emit); err != nil {
			return err
		}
	} else if p.header {
		// A stream with no audio still owes the client a valid WAV.
		if err := p.encode(nil, emit); err != nil {
			return err
		}
	}
	switch {
	case p.opus != nil:
		return p.opus.Flush(emit)
	case p.ogg != nil:
		return p.ogg.Flush(emit)
	case p.flac != nil:
		var err error
		if p.out, err = p.flac.Flush(p.out[:0]); err != nil {
			return err
		}
		return emitNonEmpty(p.out, emit)
	case p.mp3 != nil:
		var err error
		if p.out, err = p.mp3.Flush(p.out[:0]); err != nil {
			return err
		}
		return emitNonEmpty(p.out, emit)
	}
	return nil
}

func (p *Pipeline) encode(samples []float32, emit func([]byte) error) error {
	var err error
	switch {
	case p.opus != nil:
		return p.opus.Write(samples, emit)
	case p.ogg != nil:
		return p.ogg.Write(samples, emit)
	case p.flac != nil:
		p.out, err = p.flac.Encode(p.out[:0], samples)
	case p.mp3 != nil:
		p.out, err = p.mp3.Encode(p.out[:0], samples)
	case p.header:
		p.header = false
		p.out = AppendWAVHeader(p.out[:0], p.rate, 16, false, -1)
		p.out = AppendPCM(p.out, S16LE, samples)
	case p.format == WAV:
		p.out = AppendPCM(p.out[:0], S16LE, samples)
	default:
		p.out = AppendPCM(p.out[:0], p.format, samples)
	}
	if err != nil {
		return err
	}
	return emitNonEmpty(p.out, emit)
}

func emitNonEmpty(b []byte, emit func([]byte) error) error {
	if len(b) == 0 {
		return nil
	}
	return emit(b)
}

// Close frees the C resources. It is idempotent; Write and Flush fail
// with ErrClosed afterwards.
func (p *Pipeline) Close() error {
	p.closed = true
	if p.rs != nil {
		p.rs.Close()
	}
	if p.mp3 != nil {
		p.mp3.Close()
	}
	if p.flac != nil {
		p.flac.Close()
	}
	return nil
}
