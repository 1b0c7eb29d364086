//go:build nomp3

package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/hajimehoshi/go-mp3"
)

// Without libmp3lame there is no hip decoder: MP3 uploads go through
// go-mp3, which is weaker on 22.05 kHz (MPEG-2) files, behind the panic
// guard.
func decodeMP3Clip(data []byte) ([]float32, int, error) {
	return guard("mp3", func() ([]float32, int, error) { return decodeMP3(data) })
}

func decodeMP3(data []byte) ([]float32, int, error) {
	d, err := mp3.NewDecoder(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: mp3: %v", ErrCorrupt, err)
	}
	rate := d.SampleRate()
	if rate <= 0 {
		return nil, 0, fmt.Errorf("%w: mp3 without a sample rate", ErrCorrupt)
	}
	// go-mp3 always yields 16-bit little-endian stereo, mono duplicated.
	var out []float32
	buf := make([]byte, 4*1152)
	for {
		n, err := io.ReadFull(d, buf)
		for i := 0; i+4 <= n; i += 4 {
			l := int16(uint16(buf[i]) | uint16(buf[i+1])<<8)
			r := int16(uint16(buf[i+2]) | uint16(buf[i+3])<<8)
			out = append(out, (float32(l)+float32(r))/(2<<15))
		}
		if len(out) > MaxClipSamples {
			return nil, 0, ErrTooLong
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: mp3: %v", ErrCorrupt, err)
		}
	}
	if len(out) == 0 {
		return nil, 0, fmt.Errorf("%w: mp3 without audio frames", ErrCorrupt)
	}
	return out, rate, nil
}
