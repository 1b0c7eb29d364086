//go:build !nomp3

package codec

import "testing"

// BenchmarkMP3Encode: one second at 24 kHz, 64 kbit/s CBR, quality 5.
func BenchmarkMP3Encode(b *testing.B) {
	in := voiceLike(24000, 24000)
	e, err := NewMP3Encoder(24000, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	buf := make([]byte, 0, 64<<10)
	rt := startRealtime()
	for b.Loop() {
		if buf, err = e.Encode(buf[:0], in); err != nil {
			b.Fatal(err)
		}
	}
	rt.report(b, 1)
}
