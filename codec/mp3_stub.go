//go:build nomp3

package codec

// MP3Available reports whether this build links libmp3lame.
const MP3Available = false

// MP3Encoder is a stub in builds without libmp3lame.
type MP3Encoder struct{}

// NewMP3Encoder always fails in this build.
func NewMP3Encoder(rate, bitrateKbps int) (*MP3Encoder, error) { return nil, ErrNoMP3 }

// Encode always fails in this build.
func (e *MP3Encoder) Encode(dst []byte, samples []float32) ([]byte, error) { return dst, ErrNoMP3 }

// Flush always fails in this build.
func (e *MP3Encoder) Flush(dst []byte) ([]byte, error) { return dst, ErrNoMP3 }

// Close does nothing.
func (e *MP3Encoder) Close() error { return nil }
