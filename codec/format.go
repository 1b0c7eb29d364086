// Package codec converts the engine's float32 mono audio into the formats
// clients ask for, resamples it with libsoxr, and decodes uploaded clips
// back to float32 mono.
//
// A Pipeline per stream does the whole conversion; NewPipeline asks the
// format registry (registry.go) for the Format's entry, a FormatSpec, which
// sets the rate and makes the Encoder. The registered formats:
//
//   - raw: s16le, s24le, s32le, f32le, f64le (linear PCM) and mulaw, alaw
//     (G.711, one byte per sample, telephony), at any rate; IsPCM is true
//     for all of them, IsLinearPCM only for the first five;
//   - wav: 16-bit PCM WAV, streamed with unknown sizes;
//   - opus: bare 20 ms Opus packets at 48 kHz (the realtime WebSocket);
//   - mp3: CBR MP3 through libmp3lame (not in builds tagged nomp3);
//   - ogg_opus (OggOpus): an Ogg Opus file at 48 kHz, pages streamed as
//     packets arrive (OggOpusWriter);
//   - flac (FLAC): streamable 16-bit mono FLAC through libFLAC
//     (FLACEncoder).
//
// ParseFormat accepts the output_format names only (the raw formats, wav,
// opus, mp3); OggOpus and FLAC are containers the compatible endpoint
// selects by its own response_format names.
//
// # Adding a format
//
// A format is its encoder file and one entry in formatTable (registry.go);
// nothing else in the package lists formats:
//
//  1. Declare the Format constant (this file) if callers are to name it.
//  2. In the encoder's own file, implement Encoder: Write emits whole units
//     of the format (a packet, whole pages or frames) from a buffer the
//     encoder owns and reuses, so that a warm stream does not allocate;
//     Flush drains it once (later calls emit nothing); Close frees any C
//     state and is idempotent. A library with an append-style API
//     (Encode(dst, samples) / Flush(dst) / Close, as FLACEncoder and
//     MP3Encoder) needs no Encoder of its own: wrap it in appendEncoder.
//     Add the constructor, func(EncoderConfig) (Encoder, error).
//  3. Add the FormatSpec to formatTable: the name, its ContentType, its
//     Framing, BytesPerSample for a raw format (with put and get, which
//     AppendPCM and DecodePCM then use, and New: newPCMEncoder), FixedRate
//     or Rate if it cannot encode at any rate, OutputFormat if the public
//     output_format parameter may name it, and New.
//
// NewPipeline, ParseFormat, BytesPerSample, IsPCM, AppendPCM and DecodePCM
// then know it, and TestRegistryRoundTrip checks it (with a decoder from
// decodeUnits where the package has one). Callers outside the package
// that map formats to their own names or media types still do so
// themselves (LookupFormat gives them the entry).
package codec

import (
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
	// MuLaw and ALaw are G.711 telephony audio: one byte per sample, mono,
	// headerless like the raw PCM formats.
	MuLaw Format = "mulaw"
	ALaw  Format = "alaw"
)

// Containers for the compatible endpoint's response_format. They are not
// output_format names, so ParseFormat refuses them: the endpoint maps its
// own names ("opus" there is Ogg Opus, while output_format "opus" is bare
// 20 ms packets) and passes these to NewPipeline.
const (
	OggOpus Format = "ogg_opus" // Ogg Opus file, audio/ogg
	FLAC    Format = "flac"     // 16-bit mono FLAC, audio/flac
)

// ParseFormat accepts the exact lower-case names only: the interface is
// case-sensitive and a lenient parser would accept requests that other
// servers in a deployment refuse. The names are those of the registry
// entries marked OutputFormat.
func ParseFormat(s string) (Format, bool) {
	if spec := lookup(Format(s)); spec != nil && spec.OutputFormat {
		return spec.Format, true
	}
	return "", false
}

// BytesPerSample is the size of one mono sample for the raw formats (linear
// PCM and G.711) and 0 for containers, codecs and unknown formats: the
// registry entry's BytesPerSample.
func (f Format) BytesPerSample() int {
	if spec := lookup(f); spec != nil {
		return spec.BytesPerSample
	}
	return 0
}

// IsPCM reports whether f is headerless raw samples of a fixed width:
// linear PCM or G.711 (whose own title is "pulse code modulation"). Such a
// stream is cut anywhere between samples, its duration is bytes divided by
// BytesPerSample and the rate, and AppendPCM and DecodePCM handle it. Code
// that needs linear samples (a WAV header's bit depth, a format's value
// range) asks IsLinearPCM.
func (f Format) IsPCM() bool { return f.BytesPerSample() > 0 }

// IsLinearPCM reports whether f is raw linear PCM (integer or float), not
// companded G.711.
func (f Format) IsLinearPCM() bool { return f.IsPCM() && !f.IsG711() }

// IsG711 reports whether f is mu-law or A-law.
func (f Format) IsG711() bool { return f == MuLaw || f == ALaw }

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

// DecodePCM decodes raw bytes of format f (linear PCM, or G.711 expanded to
// the middle of each code's step) to float32 samples. The input must hold
// whole samples.
func DecodePCM(f Format, b []byte) ([]float32, error) {
	spec := lookup(f)
	if spec == nil || spec.BytesPerSample == 0 {
		return nil, fmt.Errorf("%w: %q is not a PCM format", ErrUnknownFormat, f)
	}
	n := spec.BytesPerSample
	if len(b)%n != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %s samples", ErrCorrupt, len(b), f)
	}
	out := make([]float32, len(b)/n)
	spec.get(out, b)
	return out, nil
}
