package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hraban/opus"
)

// opusHeadChannels finds the channel count in an Ogg Opus identification
// header ("OpusHead", version, channel count, ...). libopusfile knows it,
// but the hraban/opus Stream does not expose it, and op_read_float
// interleaves all channels.
func opusHeadChannels(data []byte) (int, error) {
	i := bytes.Index(data[:min(len(data), 4096)], []byte("OpusHead"))
	if i < 0 || i+10 > len(data) {
		return 0, fmt.Errorf("%w: Ogg stream without an Opus header", ErrUnknownFormat)
	}
	ch := int(data[i+9])
	if ch < 1 || ch > 8 {
		return 0, fmt.Errorf("%w: Ogg Opus with %d channels", ErrCorrupt, ch)
	}
	return ch, nil
}

// decodeOggOpus decodes through libopusfile, which always outputs 48 kHz
// whatever input rate the header records.
func decodeOggOpus(data []byte) ([]float32, int, error) {
	ch, err := opusHeadChannels(data)
	if err != nil {
		return nil, 0, err
	}
	s, err := opus.NewStream(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: ogg opus: %v", ErrCorrupt, err)
	}
	defer s.Close()
	var out []float32
	buf := make([]float32, 5760*ch) // 120 ms, the longest Opus packet
	for {
		n, err := s.ReadFloat32(buf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: ogg opus: %v", ErrCorrupt, err)
		}
		// A chained stream may change channel count between links; never
		// trust n*ch beyond the buffer.
		out = mixDown(out, buf[:min(n*ch, len(buf))], ch)
		if len(out) > MaxClipSamples {
			return nil, 0, ErrTooLong
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%w: ogg opus without audio", ErrCorrupt)
	}
	return out, OpusRate, nil
}

// mixDown averages interleaved frames of ch channels and appends them.
func mixDown(out, in []float32, ch int) []float32 {
	scale := 1 / float32(ch)
	for i := 0; i+ch <= len(in); i += ch {
		var sum float32
		for _, v := range in[i : i+ch] {
			sum += v
		}
		out = append(out, sum*scale)
	}
	return out
}
