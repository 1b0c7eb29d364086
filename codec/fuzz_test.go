package codec

import (
	"bytes"
	"errors"
	"testing"
)

// The fuzz targets share one rule: any input gives samples at a positive
// rate or one of the typed errors, never a panic. Seeds made by sox, lame,
// flac and opusenc live in testdata/fuzz/<target>; run one with e.g.
//
//	go test -run '^$' -fuzz FuzzDecodeFLAC -fuzztime 60s ./codec

func FuzzReadWAV(f *testing.F) {
	f.Add(ourWAV(8000, S16LE, sine(50, 8000, 440, 0.5)))
	f.Add(ourWAV(8000, F64LE, sine(20, 8000, 440, 0.5)))
	f.Add(append(AppendWAVHeader(nil, 8000, 24, false, -1), 1, 2, 3, 4, 5, 6))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, rate, err := ReadWAV(bytes.NewReader(b))
		checkTyped(t, len(s), rate, err)
	})
}

func FuzzDecodeMP3(f *testing.F) {
	f.Add([]byte{0xFF, 0xFB, 0x90, 0x64, 0, 0, 0, 0})
	// Whole frames from our encoder (100 ms at 22050 Hz, MPEG-2, about
	// 1 kB), made at test time, let the fuzzer mutate real bitstreams and
	// reach hip's frame decoding rather than only its sync search.
	if e, err := NewMP3Encoder(22050, 32); err == nil {
		b, _ := e.Encode(nil, voiceLike(2205, 22050))
		b, _ = e.Flush(b)
		e.Close()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { fuzzClip(t, b) })
}

func FuzzDecodeFLAC(f *testing.F) {
	f.Add([]byte("fLaC\x80\x00\x00\x22"))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzClip(t, b) })
}

func FuzzDecodeOgg(f *testing.F) {
	f.Add([]byte("OggS\x00\x02OpusHead\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzClip(t, b) })
}

func fuzzClip(t *testing.T, b []byte) {
	s, rate, err := DecodeClip(b)
	checkTyped(t, len(s), rate, err)
}

func checkTyped(t *testing.T, n, rate int, err error) {
	t.Helper()
	switch {
	case err == nil && rate <= 0:
		t.Fatalf("%d samples at rate %d without an error", n, rate)
	case err != nil && !errors.Is(err, ErrUnknownFormat) && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTooLong):
		t.Fatalf("untyped error: %v", err)
	}
}
