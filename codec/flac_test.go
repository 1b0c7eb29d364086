package codec

import (
	"bytes"
	"encoding/binary"
	"os/exec"
	"regexp"
	"testing"
)

// flacStreamInfo reads the fields of the STREAMINFO block that follows the
// "fLaC" marker (it must come first).
func flacStreamInfo(t *testing.T, b []byte) (rate, channels, bits int, total uint64, md5 []byte) {
	t.Helper()
	if len(b) < 42 || string(b[:4]) != "fLaC" || b[4]&0x7F != 0 || binary.BigEndian.Uint32(b[4:])&0xFFFFFF != 34 {
		t.Fatalf("no STREAMINFO: % x", b[:min(len(b), 42)])
	}
	si := b[8:42]
	v := binary.BigEndian.Uint64(si[10:18]) // rate:20 channels-1:3 bits-1:5 total:36
	return int(v >> 44), int(v>>41&7) + 1, int(v>>36&31) + 1, v & (1<<36 - 1), si[18:34]
}

// TestFLAC: a pipeline at several rates gives a streamable 16-bit mono FLAC
// whose frames flow during Write, that flac -t accepts, and that the
// reference decoder turns back into exactly the samples an s16le pipeline
// gives for the same input (lossless). The decoding is flac's, not
// DecodeClip's: mewkiz/flac logs a line for every 24 kHz frame it parses.
func TestFLAC(t *testing.T) {
	if _, err := exec.LookPath("flac"); err != nil {
		t.Skip("flac is not installed (scripts/deps.sh installs it)")
	}
	in := voiceLike(22050, 22050)
	for _, rate := range []int{8000, 22050, 24000, 44100, 48000} {
		p, writes, flush := stream(t, FLAC, 22050, rate, in, 441)
		if p.Rate() != rate {
			t.Fatalf("Rate() = %d, want %d", p.Rate(), rate)
		}
		all := bytes.Join(append(writes, flush...), nil)
		r, ch, bits, total, md5 := flacStreamInfo(t, all)
		if r != rate || ch != 1 || bits != 16 || total != 0 || !bytes.Equal(md5, make([]byte, 16)) {
			t.Fatalf("%d Hz: STREAMINFO rate %d channels %d bits %d total %d md5 %x", rate, r, ch, bits, total, md5)
		}
		// One second in blocks of 1152: all but the last one or two frames
		// must be out before Flush.
		if early := len(bytes.Join(writes, nil)); early < len(all)/2 {
			t.Errorf("%d Hz: %d of %d bytes before Flush", rate, early, len(all))
		}
		path := tempFile(t, "a.flac", all)
		if out := string(run(t, "flac", "-t", "-s", path)); regexp.MustCompile(`(?i)error|lost sync`).MatchString(out) {
			t.Errorf("%d Hz: flac -t: %s", rate, out)
		}
		raw := path + ".raw"
		run(t, "flac", "-d", "-s", "--force-raw-format", "--endian=little", "--sign=signed", "-o", raw, path)
		got := readFile(t, raw)
		_, ref := pipe(t, S16LE, rate, in)
		if want := bytes.Join(ref, nil); !bytes.Equal(got, want) {
			t.Fatalf("%d Hz: decoded %d bytes differ from the s16le pipeline's %d: not lossless", rate, len(got), len(want))
		}
	}
}

// TestFLACEmpty: a stream without audio is still a valid FLAC file.
func TestFLACEmpty(t *testing.T) {
	p, writes, flush := stream(t, FLAC, 24000, 24000, nil, 1)
	all := bytes.Join(append(writes, flush...), nil)
	if r, _, _, _, _ := flacStreamInfo(t, all); r != p.Rate() {
		t.Fatalf("rate %d", r)
	}
	if _, err := exec.LookPath("flac"); err != nil {
		t.Skip("flac is not installed (scripts/deps.sh installs it)")
	}
	run(t, "flac", "-t", "-s", tempFile(t, "a.flac", all))
}

// TestFLACClosed: the encoder refuses work after Close and after Flush,
// and Close is idempotent.
func TestFLACClosed(t *testing.T) {
	e, err := NewFLACEncoder(24000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Flush(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Encode(nil, make([]float32, 10)); err == nil {
		t.Error("Encode after Flush succeeded")
	}
	if b, err := e.Flush(nil); err != nil || len(b) != 0 {
		t.Errorf("second Flush: %d bytes, %v", len(b), err)
	}
	e.Close()
	e.Close()
	if _, err := e.Encode(nil, make([]float32, 10)); err == nil {
		t.Error("Encode after Close succeeded")
	}
	if _, err := NewFLACEncoder(0); err == nil {
		t.Error("rate 0 accepted")
	}
}
