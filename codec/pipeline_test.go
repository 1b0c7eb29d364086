package codec

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// pipe runs in (22050 Hz) through a pipeline in 20 ms chunks and returns
// the units emitted, copied.
func pipe(t *testing.T, f Format, outRate int, in []float32) (*Pipeline, [][]byte) {
	t.Helper()
	p, err := NewPipeline(22050, f, outRate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var units [][]byte
	emit := func(b []byte) error {
		units = append(units, bytes.Clone(b))
		return nil
	}
	for len(in) > 0 {
		n := min(441, len(in))
		if err := p.Write(in[:n], emit); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	if err := p.Flush(emit); err != nil {
		t.Fatal(err)
	}
	return p, units
}

// TestPipelinePCM: every PCM format and rate gives whole samples per emit
// and a 1 kHz tone at the right rate, length and frequency.
func TestPipelinePCM(t *testing.T) {
	in := sine(22050, 22050, 1000, 0.5)
	for _, f := range pcmFormats {
		for _, rate := range []int{8000, 22050, 24000, 48000} {
			p, units := pipe(t, f, rate, in)
			if p.Rate() != rate {
				t.Fatalf("%s: Rate() = %d, want %d", f, p.Rate(), rate)
			}
			var all []byte
			for _, u := range units {
				if len(u)%f.BytesPerSample() != 0 {
					t.Fatalf("%s@%d: unit of %d bytes splits a sample", f, rate, len(u))
				}
				all = append(all, u...)
			}
			out, err := DecodePCM(f, all)
			if err != nil {
				t.Fatal(err)
			}
			if d := len(out) - rate; d < -2 || d > 2 {
				t.Errorf("%s@%d: %d samples, want %d", f, rate, len(out), rate)
			}
			if fr := zeroCrossFreq(t, out[rate/10:len(out)-rate/10], rate); math.Abs(fr-1000) > 1 {
				t.Errorf("%s@%d: frequency %.2f", f, rate, fr)
			}
		}
	}
}

// TestPipelineWAV: a streaming header first, then s16le; the whole reads
// back with our reader and soxi.
func TestPipelineWAV(t *testing.T) {
	in := sine(22050, 22050, 1000, 0.5)
	_, units := pipe(t, WAV, 24000, in)
	if len(units[0]) < 44 || string(units[0][:4]) != "RIFF" {
		t.Fatalf("first unit %q is not a WAV header", units[0][:min(12, len(units[0]))])
	}
	wav := bytes.Join(units, nil)
	got, rate, err := ReadWAV(bytes.NewReader(wav))
	if err != nil || rate != 24000 || math.Abs(float64(len(got)-24000)) > 2 {
		t.Fatalf("ReadWAV: %d samples at %d Hz, %v", len(got), rate, err)
	}
	run(t, "soxi", tempFile(t, "p.wav", wav))

	_, units = pipe(t, WAV, 24000, nil) // no audio at all: still a valid WAV
	if len(units) != 1 || len(units[0]) != 44 {
		t.Fatalf("empty stream: %d units", len(units))
	}
}

// TestPipelineOpus: output is forced to 48 kHz, one packet per emit, and
// the packets decode to the input, for a test signal and for espeak-ng
// speech.
func TestPipelineOpus(t *testing.T) {
	speech, rate, err := ReadWAV(bytes.NewReader(clips(t)["speech.wav"]))
	if err != nil || rate != 22050 {
		t.Fatalf("speech: %d Hz, %v", rate, err)
	}
	for name, in := range map[string][]float32{"voice-like": voiceLike(22050, 22050), "espeak": speech} {
		p, units := pipe(t, Opus, 24000, in)
		if p.Rate() != 48000 {
			t.Fatalf("Rate() = %d", p.Rate())
		}
		if want := (len(in)*48000/22050 + 959) / 960; len(units) < want || len(units) > want+1 {
			t.Fatalf("%s: %d packets, want %d", name, len(units), want)
		}
		ref := resampleAll(t, in, 22050, 48000, []int{len(in)})
		c, lag := bestCorrelation(ref, decodeOpusPackets(t, units), 1000)
		if c < 0.9 {
			t.Fatalf("%s: correlation %.3f at lag %d", name, c, lag)
		}
		t.Logf("%s: correlation %.4f at lag %d", name, c, lag)
	}
}

func TestPipelineMP3(t *testing.T) {
	if !MP3Available {
		t.Skip("built without MP3")
	}
	p, units := pipe(t, MP3, 24000, voiceLike(22050, 22050))
	if p.Rate() != 24000 {
		t.Fatalf("Rate() = %d", p.Rate())
	}
	got, rate := mp3Length(t, bytes.Join(units, nil))
	if rate != 24000 || got < 24000 || got > 24000+lameDelay+576 {
		t.Fatalf("decoded %d samples at %d Hz", got, rate)
	}
}

func TestPipelineEmitError(t *testing.T) {
	boom := errors.New("write: broken pipe")
	for _, f := range []Format{S16LE, F32LE, WAV, Opus, MP3, MuLaw, ALaw, OggOpus, FLAC} {
		if f == MP3 && !MP3Available {
			continue
		}
		p, err := NewPipeline(22050, f, 24000)
		if err != nil {
			t.Fatal(err)
		}
		fe := &failingEmit{n: 1, err: boom}
		err = p.Write(sine(22050, 22050, 440, 0.5), fe.emit)
		if err == nil && f == MP3 { // lame may hold the first second back
			err = p.Flush(fe.emit)
		}
		if !errors.Is(err, boom) || fe.calls != 1 {
			t.Errorf("%s: err %v after %d emits, want %v after 1", f, err, fe.calls, boom)
		}
		p.Close()
	}
}

func TestPipelineLifecycle(t *testing.T) {
	if _, err := NewPipeline(22050, "aac", 24000); !errors.Is(err, ErrUnknownFormat) {
		t.Errorf("aac: %v", err)
	}
	if _, err := NewPipeline(0, S16LE, 24000); err == nil {
		t.Error("zero input rate accepted")
	}
	p, err := NewPipeline(22050, S16LE, 24000)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	nop := func([]byte) error { return nil }
	q, err := NewPipeline(22050, WAV, 24000)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Flush(nop); err != nil {
		t.Fatal(err)
	}
	if err := q.Flush(func([]byte) error { return errors.New("second flush emitted") }); err != nil {
		t.Errorf("second Flush: %v", err)
	}
	if err := q.Write([]float32{0}, nop); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Flush: %v", err)
	}
	if err := p.Write([]float32{0}, nop); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := p.Flush(nop); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
}

// TestPipelineNoAllocs: once warm, a 20 ms chunk costs no allocation for
// the formats on the realtime paths, the telephony ones and the compatible
// endpoint's containers (libFLAC's buffers are C memory, not counted, but
// they are reused as well).
func TestPipelineNoAllocs(t *testing.T) {
	chunk := voiceLike(441, 22050)
	nop := func([]byte) error { return nil }
	for _, f := range []Format{S16LE, F32LE, Opus, MuLaw, ALaw, OggOpus, FLAC} {
		p, err := NewPipeline(22050, f, 24000)
		if err != nil {
			t.Fatal(err)
		}
		for range 10 {
			p.Write(chunk, nop)
		}
		if n := testing.AllocsPerRun(50, func() { p.Write(chunk, nop) }); n > 0 {
			t.Errorf("%s: %.1f allocations per chunk", f, n)
		}
		p.Close()
	}
}
