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
	enc     Encoder    // from the format's registry entry
	flushed bool       // the stream has ended: the encoder is spent
	closed  bool
	samples []float32 // resampled audio, reused
}

// NewPipeline converts from inRate to format f at outRate. The format's
// registry entry (registry.go) makes the encoder and sets the rate: WAV
// streams a 16-bit header (sizes unknown) then s16le; mu-law and A-law are
// raw like s16le, one byte per sample; Opus and Ogg Opus always run at
// 48 kHz (the Ogg header records inRate as the input rate); MP3 runs at
// MP3Rate(outRate); FLAC is 16-bit at outRate. Rate reports the effective
// rate. A format without an entry is ErrUnknownFormat.
func NewPipeline(inRate int, f Format, outRate int) (*Pipeline, error) {
	if inRate <= 0 || outRate <= 0 {
		return nil, fmt.Errorf("codec: pipeline %d -> %d Hz: rates must be positive", inRate, outRate)
	}
	spec := lookup(f)
	if spec == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownFormat, f)
	}
	p := &Pipeline{format: f, rate: spec.OutputRate(outRate)}
	var err error
	p.enc, err = spec.New(EncoderConfig{Format: f, InputRate: inRate, Rate: p.rate})
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
	return p.enc.Write(samples, emit)
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
		if err := p.enc.Write(p.samples, emit); err != nil {
			return err
		}
	}
	return p.enc.Flush(emit)
}

// Close frees the C resources. It is idempotent; Write and Flush fail
// with ErrClosed afterwards.
func (p *Pipeline) Close() error {
	if p.closed {
		return nil // the encoder may be pooled: it is closed once
	}
	p.closed = true
	if p.rs != nil {
		p.rs.Close()
	}
	if p.enc != nil {
		p.enc.Close()
		p.enc = nil
	}
	return nil
}
