package codec

import "errors"

// Typed errors for clip decoding. Callers map them to client errors (an
// unusable upload), so they must be distinguishable from internal failures:
// test with errors.Is, the returned error usually wraps one of these with detail.
var (
	// ErrUnknownFormat: the bytes are not a container or codec we decode.
	ErrUnknownFormat = errors.New("codec: unknown audio format")
	// ErrCorrupt: the container was recognised but its content is broken.
	ErrCorrupt = errors.New("codec: corrupt audio data")
	// ErrTooLong: a decoded clip would exceed MaxClipSamples.
	ErrTooLong = errors.New("codec: audio clip too long")
	// ErrClosed: a Pipeline, Resampler or encoder was used after Close.
	ErrClosed = errors.New("codec: use after close")
	// ErrNoMP3: NewMP3Encoder in a build without libmp3lame (tag nomp3).
	ErrNoMP3 = errors.New("codec: built without MP3 support (tag nomp3)")
)
