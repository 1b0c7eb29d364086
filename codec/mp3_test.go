//go:build !nomp3

package codec

import (
	"errors"
	"testing"
)

const mp3FrameSamples = 1152 // MPEG-1; MPEG-2/2.5 frames hold 576

// TestMP3Duration: the stream decodes with go-mp3 at the right rate to the
// input's duration plus LAME's fixed delay, within one frame.
func TestMP3Duration(t *testing.T) {
	for _, rate := range []int{16000, 22050, 24000, 32000, 44100, 48000} {
		e, err := NewMP3Encoder(rate, 0)
		if err != nil {
			t.Fatal(err)
		}
		in := voiceLike(rate, rate)
		var b []byte
		for len(in) > 0 { // 20 ms chunks, as a stream would arrive
			n := min(rate/50, len(in))
			if b, err = e.Encode(b, in[:n]); err != nil {
				t.Fatal(err)
			}
			in = in[n:]
		}
		if b, err = e.Flush(b); err != nil {
			t.Fatal(err)
		}
		e.Close()
		got, gotRate := mp3Length(t, b)
		frame := mp3FrameSamples
		if rate < 32000 {
			frame /= 2 // MPEG-2 frames are half as long
		}
		want := rate + lameDelay
		if gotRate != rate || got-want > frame || want-got > frame {
			t.Errorf("%d Hz: decoded %d samples at %d Hz, want %d ± %d", rate, got, gotRate, want, frame)
		}
		t.Logf("%d Hz: %d bytes, decoded %d samples, want %d", rate, len(b), got, want)
	}
}

func TestMP3Errors(t *testing.T) {
	if _, err := NewMP3Encoder(23000, 64); err == nil {
		t.Error("23000 Hz accepted")
	}
	for _, tt := range []struct{ rate, kbps int }{{8000, 64}, {16000, 320}, {48000, 144}, {24000, 65}, {24000, -1}} {
		if _, err := NewMP3Encoder(tt.rate, tt.kbps); err == nil {
			t.Errorf("%d Hz at %d kbit/s accepted", tt.rate, tt.kbps)
		}
	}
	e, err := NewMP3Encoder(24000, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if err := e.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := e.Encode(nil, []float32{0}); !errors.Is(err, ErrClosed) {
		t.Errorf("Encode after Close: %v", err)
	}
	if _, err := e.Flush(nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
}

func TestMP3Rate(t *testing.T) {
	tests := []struct{ in, want int }{
		{8000, 16000}, {16000, 16000}, {17000, 22050}, {22050, 22050}, {24000, 24000}, {30000, 32000}, {48000, 48000}, {96000, 48000},
	}
	for _, tt := range tests {
		if got := MP3Rate(tt.in); got != tt.want {
			t.Errorf("MP3Rate(%d) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
