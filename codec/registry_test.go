package codec

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// decodeUnits turns a stream's emitted units back into samples and their
// rate, with the decoder the package (or its tests) has for the format's
// kind; ok is false where there is none.
func decodeUnits(t *testing.T, spec FormatSpec, rate int, units [][]byte) (s []float32, r int, ok bool) {
	t.Helper()
	switch {
	case spec.BytesPerSample > 0:
		for _, u := range units {
			if len(u)%spec.BytesPerSample != 0 {
				t.Fatalf("%s: unit of %d bytes splits a sample", spec.Format, len(u))
			}
		}
		s, err := DecodePCM(spec.Format, bytes.Join(units, nil))
		if err != nil {
			t.Fatalf("%s: %v", spec.Format, err)
		}
		return s, rate, true // headerless: the rate is the pipeline's
	case spec.Format == Opus:
		return decodeOpusPackets(t, units), OpusRate, true
	case spec.Framing == FramingStream:
		all := bytes.Join(units, nil)
		if sniff(all) == "" {
			return nil, 0, false // a container DecodeClip does not read
		}
		s, r, err := DecodeClip(all)
		if err != nil {
			t.Fatalf("%s: DecodeClip: %v", spec.Format, err)
		}
		return s, r, true
	}
	return nil, 0, false
}

// TestRegistryRoundTrip walks the registry: every format's entry is
// consistent with the Format methods, its pipeline runs at the rate the
// entry promises, and its output decodes back to the same tone, for every
// format the package can decode.
func TestRegistryRoundTrip(t *testing.T) {
	in := sine(22050, 22050, 1000, 0.5)
	formats := Formats()
	if len(formats) == 0 {
		t.Fatal("empty registry")
	}
	seen := map[Format]bool{}
	for _, f := range formats {
		t.Run(string(f), func(t *testing.T) {
			if seen[f] {
				t.Fatalf("%s registered twice", f)
			}
			seen[f] = true
			spec, ok := LookupFormat(f)
			if !ok || spec.Format != f || spec.New == nil || spec.ContentType == "" {
				t.Fatalf("entry %+v, %v", spec, ok)
			}
			if f.BytesPerSample() != spec.BytesPerSample || f.IsPCM() != (spec.Framing == FramingSamples) {
				t.Errorf("BytesPerSample %d, IsPCM %v; entry %d, framing %d", f.BytesPerSample(), f.IsPCM(), spec.BytesPerSample, spec.Framing)
			}
			if _, ok := ParseFormat(string(f)); ok != spec.OutputFormat {
				t.Errorf("ParseFormat: %v, entry says output format %v", ok, spec.OutputFormat)
			}
			for _, req := range []int{8000, 24000, 44100} {
				got := spec.OutputRate(req)
				if spec.FixedRate > 0 && got != spec.FixedRate || spec.FixedRate == 0 && spec.Rate == nil && got != req {
					t.Errorf("OutputRate(%d) = %d", req, got)
				}
			}
			if f == MP3 && !MP3Available {
				if _, err := NewPipeline(22050, f, 24000); !errors.Is(err, ErrNoMP3) {
					t.Errorf("nomp3 build: %v, want ErrNoMP3", err)
				}
				t.Skip("built without MP3")
			}

			p, units := pipe(t, f, 24000, in)
			if p.Rate() != spec.OutputRate(24000) {
				t.Fatalf("Rate() = %d, entry says %d", p.Rate(), spec.OutputRate(24000))
			}
			if len(units) == 0 {
				t.Fatal("no output")
			}
			out, rate, ok := decodeUnits(t, spec, p.Rate(), units)
			if !ok {
				t.Logf("%s: no decoder in the package, output checked for presence only", f)
				return
			}
			if rate != p.Rate() {
				t.Errorf("decoded at %d Hz, pipeline says %d", rate, p.Rate())
			}
			// Codecs add their delay and pad the last frame; none loses audio.
			if n := len(out); n < rate*98/100 || n > rate*110/100 {
				t.Errorf("decoded %d samples for one second at %d Hz", n, rate)
			}
			mid := out[len(out)/5 : len(out)*4/5]
			if fr := zeroCrossFreq(t, mid, rate); math.Abs(fr-1000) > 2 {
				t.Errorf("frequency %.2f Hz, want 1000", fr)
			}
		})
	}
}

// TestRegistryEncoderContract: every registered encoder, made straight from
// its entry, may be flushed twice (the second emits nothing) and closed
// twice, and closed without a flush.
func TestRegistryEncoderContract(t *testing.T) {
	chunk := voiceLike(960, 24000)
	for _, f := range Formats() {
		if f == MP3 && !MP3Available {
			continue
		}
		spec, _ := LookupFormat(f)
		cfg := EncoderConfig{Format: f, InputRate: 22050, Rate: spec.OutputRate(24000)}
		e, err := spec.New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		var n int
		emit := func(b []byte) error {
			if len(b) == 0 {
				t.Errorf("%s: empty unit emitted", f)
			}
			n += len(b)
			return nil
		}
		if err := e.Write(chunk, emit); err != nil {
			t.Fatalf("%s: Write: %v", f, err)
		}
		if err := e.Flush(emit); err != nil {
			t.Fatalf("%s: Flush: %v", f, err)
		}
		if n == 0 {
			t.Errorf("%s: nothing out for 40 ms and a flush", f)
		}
		if err := e.Flush(func([]byte) error { return errors.New("second flush emitted") }); err != nil {
			t.Errorf("%s: second Flush: %v", f, err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: Close: %v", f, err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("%s: second Close: %v", f, err)
		}
		// Abandoned: closed without a flush.
		if e, err = spec.New(cfg); err != nil {
			t.Fatal(err)
		}
		e.Write(chunk, emit)
		if err := e.Close(); err != nil {
			t.Errorf("%s: Close without Flush: %v", f, err)
		}
	}
}

// TestRegistryRefusesUnknown: a format without an entry is refused
// everywhere the registry is asked.
func TestRegistryRefusesUnknown(t *testing.T) {
	for _, f := range []Format{"aac", "", "S16LE", "pcm", "ogg", "wav "} {
		if _, err := NewPipeline(22050, f, 24000); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("NewPipeline(%q): %v", f, err)
		}
		if _, ok := LookupFormat(f); ok {
			t.Errorf("LookupFormat(%q) found an entry", f)
		}
		if _, ok := ParseFormat(string(f)); ok {
			t.Errorf("ParseFormat(%q) accepted", f)
		}
		if f.BytesPerSample() != 0 || f.IsPCM() {
			t.Errorf("%q: BytesPerSample %d", f, f.BytesPerSample())
		}
		if _, err := DecodePCM(f, []byte{0, 0}); !errors.Is(err, ErrUnknownFormat) {
			t.Errorf("DecodePCM(%q): %v", f, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendPCM(%q) did not panic", f)
				}
			}()
			AppendPCM(nil, f, []float32{0})
		}()
	}
}
