package codec

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/mewkiz/flac"
	"github.com/mewkiz/flac/frame"
)

// MaxClipSamples bounds a decoded clip (ten minutes at 48 kHz): uploads
// are reference speech of seconds, and a small compressed file must not
// be able to expand into gigabytes.
const MaxClipSamples = 48000 * 600

// DecodeClip sniffs an uploaded clip (WAV, MP3, FLAC or Ogg Opus) and
// decodes it to float32 mono at its own rate. Unrecognised input is
// ErrUnknownFormat, a broken file ErrCorrupt.
func DecodeClip(data []byte) (samples []float32, rate int, err error) {
	switch sniff(data) {
	case WAV:
		samples, rate, err = ReadWAV(bytes.NewReader(data))
	case "flac":
		samples, rate, err = guard("flac", func() ([]float32, int, error) { return decodeFLAC(data) })
	case "ogg":
		samples, rate, err = guard("ogg", func() ([]float32, int, error) { return decodeOggOpus(data) })
	case MP3:
		samples, rate, err = decodeMP3Clip(data)
	default:
		return nil, 0, ErrUnknownFormat
	}
	if err == nil && len(samples) > MaxClipSamples {
		return nil, 0, ErrTooLong
	}
	return samples, rate, err
}

// sniff names the container from its magic bytes.
func sniff(b []byte) Format {
	switch {
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return WAV
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "flac"
	case bytes.HasPrefix(b, []byte("OggS")):
		return "ogg"
	case bytes.HasPrefix(b, []byte("ID3")):
		return MP3
	case len(b) >= 4 && isMP3Header(b):
		return MP3
	}
	return ""
}

// isMP3Header checks an MPEG audio layer III frame header: frame sync,
// layer III, and bitrate and rate indexes that are not reserved.
func isMP3Header(b []byte) bool {
	return b[0] == 0xFF && b[1]&0xE0 == 0xE0 && // 11-bit sync
		b[1]&0x18 != 0x08 && // MPEG version not reserved
		b[1]&0x06 == 0x02 && // layer III
		b[2]>>4 != 0x0F && b[2]>>4 != 0 && // bitrate index
		b[2]&0x0C != 0x0C // sample rate index
}

// guard runs a third-party Go decoder. go-mp3 (used for MP3 in nomp3
// builds) indexes its tables from bitstream fields without checking them
// (fuzzing found an index out of range in maindata.getScaleFactorsMpeg2
// on 72 bytes, kept as the seed
// testdata/fuzz/FuzzDecodeMP3/regress-gomp3-index-panic), and no check on
// our side short of a second MP3 parser could rule that out. For upload
// bytes the only sane reading of such a panic is a corrupt file, so the
// recover sits at this boundary, for Go code we do not own. Our own WAV
// reader and hip binding have no recover (a recover cannot catch a C
// fault anyway) and are fuzzed to never panic.
func guard(name string, f func() ([]float32, int, error)) (s []float32, rate int, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, rate, err = nil, 0, fmt.Errorf("%w: %s decoder failed: %v", ErrCorrupt, name, r)
		}
	}()
	return f()
}

func decodeFLAC(data []byte) ([]float32, int, error) {
	s, err := flac.New(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: flac: %v", ErrCorrupt, err)
	}
	defer s.Close()
	rate := int(s.Info.SampleRate)
	if rate <= 0 || s.Info.NChannels == 0 || s.Info.BitsPerSample == 0 {
		return nil, 0, fmt.Errorf("%w: flac stream info", ErrCorrupt)
	}
	var out []float32
	for {
		f, err := s.ParseNext()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("%w: flac: %v", ErrCorrupt, err)
		}
		bits := int(f.BitsPerSample)
		if bits == 0 { // the frame defers to the stream info
			bits = int(s.Info.BitsPerSample)
		}
		if out, err = appendFLACFrame(out, f.Subframes, bits); err != nil {
			return nil, 0, err
		}
		if len(out) > MaxClipSamples {
			return nil, 0, ErrTooLong
		}
	}
	return out, rate, nil
}

// appendFLACFrame mixes one FLAC frame's channels to mono and appends it.
func appendFLACFrame(out []float32, subs []*frame.Subframe, bits int) ([]float32, error) {
	if len(subs) == 0 || bits < 4 || bits > 32 {
		return nil, fmt.Errorf("%w: flac frame with %d channels of %d bits", ErrCorrupt, len(subs), bits)
	}
	n := len(subs[0].Samples)
	for _, s := range subs[1:] {
		if len(s.Samples) != n {
			return nil, fmt.Errorf("%w: flac channels of unequal length", ErrCorrupt)
		}
	}
	scale := 1 / (float64(uint64(1)<<(bits-1)) * float64(len(subs)))
	for i := 0; i < n; i++ {
		var sum float64
		for _, s := range subs {
			sum += float64(s.Samples[i])
		}
		out = append(out, float32(sum*scale))
	}
	return out, nil
}
