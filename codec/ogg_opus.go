package codec

/*
#cgo pkg-config: opus
#include <opus.h>

// lookahead asks a throwaway encoder, set up like OpusPacketizer's, for its
// delay: opus_encoder_ctl is variadic, which cgo cannot call, and the
// hraban/opus binding does not expose OPUS_GET_LOOKAHEAD.
static int lookahead(void) {
	int err = 0;
	OpusEncoder *e = opus_encoder_create(48000, 1, OPUS_APPLICATION_AUDIO, &err);
	if (err != OPUS_OK || e == NULL) return -1;
	opus_int32 n = -1;
	if (opus_encoder_ctl(e, OPUS_GET_LOOKAHEAD(&n)) != OPUS_OK) n = -1;
	opus_encoder_destroy(e);
	return n;
}
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hraban/opus"
)

// Ogg Opus (RFC 7845) as a streaming file: the pages go out as packets
// arrive, nothing waits for the end but the last page.
//
// Pages hold at most OggOpusPagePackets packets (100 ms of audio). One page
// per 20 ms packet would cost 28 bytes of page header per 160-byte packet
// at 64 kbit/s, 11 kbit/s of overhead; five packets per page cost 32 bytes
// per 100 ms (2.6 kbit/s). The delay this adds is the time the engine takes
// to render 100 ms, a few milliseconds, not 100 ms of playback.
const OggOpusPagePackets = 5

// opusLookahead is the encoder's delay in 48 kHz samples (312 for
// libopus 1.3 in audio mode: 2.5 ms of look-ahead plus 4 ms of delay
// compensation). It is the OpusHead pre-skip: a decoder drops that many
// samples from the start, so the audio begins exactly at sample 0.
var opusLookahead = sync.OnceValue(func() int { return int(C.lookahead()) })

// silence pads the end of an Ogg Opus stream (see Flush).
var silence [OpusFrameSamples]float32

// OggOpusWriter wraps an OpusPacketizer's 20 ms packets (48 kHz mono) into
// an Ogg Opus stream: an OpusHead page, an OpusTags page, then audio pages
// whose granule positions count 48 kHz samples including the pre-skip, the
// last one flagged end-of-stream and trimmed to the exact length written.
// Not safe for concurrent use.
type OggOpusWriter struct {
	enc       *OpusPacketizer
	ogg       oggStream
	inputRate int
	preSkip   int
	samples   int64              // 48 kHz samples written
	packets   int64              // packets encoded
	headers   bool               // OpusHead and OpusTags are out
	ended     bool               // Flush ran
	out       []byte             // pages completed during one call, reused
	onPacket  func([]byte) error // w.addPacket, bound once: no closure per call
}

// NewOggOpusWriter encodes at bitrate bit/s (0: DefaultOpusBitrate).
// inputRate is the rate of the audio before it was resampled to 48 kHz; the
// header records it so that a player can decode back to it.
func NewOggOpusWriter(inputRate, bitrate int) (*OggOpusWriter, error) {
	preSkip := opusLookahead()
	if preSkip < 0 || preSkip > 0xFFFF {
		return nil, fmt.Errorf("codec: opus lookahead %d", preSkip)
	}
	enc, err := NewOpusPacketizer(bitrate)
	if err != nil {
		return nil, err
	}
	w := &OggOpusWriter{enc: enc, ogg: newOggStream(), inputRate: inputRate, preSkip: preSkip}
	w.onPacket = w.addPacket
	return w, nil
}

// PreSkip is the OpusHead pre-skip in 48 kHz samples.
func (w *OggOpusWriter) PreSkip() int { return w.preSkip }

// Write encodes 48 kHz samples and passes every page completed by them to
// emit, in one call (nothing when no page completed). The first Write also
// sends the two header pages, so a client gets a valid file start at once.
// The bytes are only valid during the call.
func (w *OggOpusWriter) Write(samples48k []float32, emit func([]byte) error) error {
	if w.ended {
		return fmt.Errorf("%w: Write after Flush", ErrClosed)
	}
	w.out = w.out[:0]
	if !w.headers {
		w.appendHeaders()
	}
	w.samples += int64(len(samples48k))
	if err := w.enc.Write(samples48k, w.onPacket); err != nil {
		return err
	}
	return emitNonEmpty(w.out, emit)
}

// Flush ends the stream. The encoder's output lags its input by the
// pre-skip, so the last real samples come out only after preSkip more
// samples go in: silence is added for that, up to a whole frame, and the
// last page's granule position (pre-skip + samples written) tells the
// decoder to drop the padding. That last page always holds at least one
// packet (the padding guarantees one), so it can carry the EOS flag.
// Later calls do nothing.
func (w *OggOpusWriter) Flush(emit func([]byte) error) error {
	if w.ended {
		return nil
	}
	w.ended = true
	w.out = w.out[:0]
	if !w.headers {
		w.appendHeaders()
	}
	if err := w.enc.Write(silence[:w.preSkip], w.onPacket); err != nil {
		return err
	}
	if err := w.enc.Flush(w.onPacket); err != nil {
		return err
	}
	w.out = w.ogg.page(w.out, int64(w.preSkip)+w.samples, true)
	return emitNonEmpty(w.out, emit)
}

// Close does nothing: all state is Go memory. It makes the writer the
// Encoder of Ogg Opus.
func (w *OggOpusWriter) Close() error { return nil }

func newOggOpusEncoder(c EncoderConfig) (Encoder, error) {
	w, err := NewOggOpusWriter(c.InputRate, 0)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// addPacket closes the open page when it is full, then adds the packet.
// Closing a page only when the next packet arrives keeps the last packet
// for Flush, which must flag its page end-of-stream.
func (w *OggOpusWriter) addPacket(packet []byte) error {
	if w.ogg.packets >= OggOpusPagePackets || !w.ogg.fits(len(packet)) {
		w.out = w.ogg.page(w.out, w.packets*OpusFrameSamples, false)
	}
	w.ogg.add(packet)
	w.packets++
	return nil
}

// appendHeaders writes the identification page (OpusHead, alone on the
// first page) and the comment page (OpusTags, on its own page), as RFC 7845
// requires, both with granule position 0.
func (w *OggOpusWriter) appendHeaders() {
	w.headers = true
	var head [19]byte
	copy(head[:], "OpusHead")
	head[8] = 1 // version
	head[9] = 1 // channels
	binary.LittleEndian.PutUint16(head[10:], uint16(w.preSkip))
	binary.LittleEndian.PutUint32(head[12:], uint32(w.inputRate))
	// head[16:18]: output gain 0 dB; head[18]: mapping family 0 (mono or
	// stereo, no channel mapping table).
	w.ogg.add(head[:])
	w.out = w.ogg.page(w.out, 0, false)

	vendor := opus.Version()
	tags := make([]byte, 0, 16+len(vendor))
	tags = append(tags, "OpusTags"...)
	tags = binary.LittleEndian.AppendUint32(tags, uint32(len(vendor)))
	tags = append(tags, vendor...)
	tags = binary.LittleEndian.AppendUint32(tags, 0) // no user comments
	w.ogg.add(tags)
	w.out = w.ogg.page(w.out, 0, false)
}
