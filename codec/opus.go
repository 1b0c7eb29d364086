package codec

import (
	"fmt"

	"github.com/hraban/opus"
)

// Opus framing: the interface fixes 48 kHz mono with 20 ms packets.
const (
	OpusRate              = 48000
	OpusFrameSamples      = OpusRate / 50
	DefaultOpusBitrate    = 64000
	DefaultOpusComplexity = 5
	// maxOpusPacket is libopus's recommended output buffer size.
	maxOpusPacket = 4000
)

// OpusPacketizer cuts a 48 kHz mono stream into 20 ms Opus packets. Input
// arrives in chunks of any size; samples that do not fill a frame wait for
// the next Write, and Flush pads the last frame with silence.
// Not safe for concurrent use.
type OpusPacketizer struct {
	enc    *opus.Encoder
	frame  []float32 // pending samples, len < OpusFrameSamples between calls
	packet []byte    // reused output buffer: emit must not keep it
}

// NewOpusPacketizer returns a packetizer at the given bitrate in bit/s
// (0 means DefaultOpusBitrate) and complexity DefaultOpusComplexity.
func NewOpusPacketizer(bitrate int) (*OpusPacketizer, error) {
	if bitrate == 0 {
		bitrate = DefaultOpusBitrate
	}
	// AppAudio rather than AppVoIP: VoIP mode favours intelligibility over
	// waveform fidelity, and TTS output is clean studio-like speech.
	enc, err := opus.NewEncoder(OpusRate, 1, opus.AppAudio)
	if err != nil {
		return nil, fmt.Errorf("codec: opus encoder: %w", err)
	}
	if err := enc.SetBitrate(bitrate); err != nil {
		return nil, fmt.Errorf("codec: opus bitrate %d: %w", bitrate, err)
	}
	p := &OpusPacketizer{
		enc:    enc,
		frame:  make([]float32, 0, OpusFrameSamples),
		packet: make([]byte, maxOpusPacket),
	}
	return p, p.SetComplexity(DefaultOpusComplexity)
}

// SetComplexity sets the encoder's complexity, 0 (fastest) to 10.
func (p *OpusPacketizer) SetComplexity(c int) error {
	if err := p.enc.SetComplexity(c); err != nil {
		return fmt.Errorf("codec: opus complexity %d: %w", c, err)
	}
	return nil
}

// Write encodes every whole frame it can and passes each packet to emit,
// one packet per call. The packet is only valid during the call.
func (p *OpusPacketizer) Write(samples48k []float32, emit func(packet []byte) error) error {
	for len(samples48k) > 0 {
		if len(p.frame) == 0 && len(samples48k) >= OpusFrameSamples {
			// Whole frame straight from the input: no copy.
			if err := p.encode(samples48k[:OpusFrameSamples], emit); err != nil {
				return err
			}
			samples48k = samples48k[OpusFrameSamples:]
			continue
		}
		n := min(OpusFrameSamples-len(p.frame), len(samples48k))
		p.frame = append(p.frame, samples48k[:n]...)
		samples48k = samples48k[n:]
		if len(p.frame) == OpusFrameSamples {
			err := p.encode(p.frame, emit)
			p.frame = p.frame[:0]
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush pads a partial last frame with silence and emits it.
func (p *OpusPacketizer) Flush(emit func(packet []byte) error) error {
	if len(p.frame) == 0 {
		return nil
	}
	p.frame = append(p.frame, make([]float32, OpusFrameSamples-len(p.frame))...)
	err := p.encode(p.frame, emit)
	p.frame = p.frame[:0]
	return err
}

// Close does nothing: the encoder state is Go memory. It makes the
// packetizer the Encoder of bare Opus.
func (p *OpusPacketizer) Close() error { return nil }

func newOpusEncoder(EncoderConfig) (Encoder, error) {
	p, err := NewOpusPacketizer(0)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (p *OpusPacketizer) encode(frame []float32, emit func([]byte) error) error {
	n, err := p.enc.EncodeFloat32(frame, p.packet)
	if err != nil {
		return fmt.Errorf("codec: opus encode: %w", err)
	}
	return emit(p.packet[:n])
}
