package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// stream runs in through a pipeline from inRate in chunks of chunk samples
// and returns what Write emitted and what Flush emitted, each unit copied.
func stream(t *testing.T, f Format, inRate, outRate int, in []float32, chunk int) (p *Pipeline, writes, flush [][]byte) {
	t.Helper()
	p, err := NewPipeline(inRate, f, outRate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	for len(in) > 0 {
		n := min(chunk, len(in))
		if err := p.Write(in[:n], func(b []byte) error { writes = append(writes, bytes.Clone(b)); return nil }); err != nil {
			t.Fatal(err)
		}
		in = in[n:]
	}
	if err := p.Flush(func(b []byte) error { flush = append(flush, bytes.Clone(b)); return nil }); err != nil {
		t.Fatal(err)
	}
	return p, writes, flush
}

// oggPage is one parsed page; the parser is written from RFC 3533
// independently of ogg.go, its CRC bit by bit.
type oggPage struct {
	flags   byte
	granule int64
	serial  uint32
	seq     uint32
	packets [][]byte
}

func crcBitwise(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04C11DB7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// parseOgg parses whole pages, failing on a page cut short, a bad CRC or
// a packet continued across pages (this writer never needs one).
func parseOgg(t *testing.T, b []byte) []oggPage {
	t.Helper()
	var pages []oggPage
	for len(b) > 0 {
		if len(b) < 27 || string(b[:4]) != "OggS" || b[4] != 0 {
			t.Fatalf("page %d: bad header % x", len(pages), b[:min(len(b), 27)])
		}
		nseg := int(b[26])
		if len(b) < 27+nseg {
			t.Fatalf("page %d: segment table cut", len(pages))
		}
		size := 27 + nseg
		for _, l := range b[27 : 27+nseg] {
			size += int(l)
		}
		if len(b) < size {
			t.Fatalf("page %d: %d bytes, header says %d", len(pages), len(b), size)
		}
		raw := bytes.Clone(b[:size])
		want := binary.LittleEndian.Uint32(raw[22:])
		binary.LittleEndian.PutUint32(raw[22:], 0)
		if got := crcBitwise(raw); got != want {
			t.Fatalf("page %d: CRC %08x, computed %08x", len(pages), want, got)
		}
		p := oggPage{flags: b[5], granule: int64(binary.LittleEndian.Uint64(b[6:])),
			serial: binary.LittleEndian.Uint32(b[14:]), seq: binary.LittleEndian.Uint32(b[18:])}
		if p.flags&1 != 0 {
			t.Fatalf("page %d: continued packet", len(pages))
		}
		body, pkt := b[27+nseg:size], []byte(nil)
		for i, l := range b[27 : 27+nseg] {
			pkt = append(pkt, body[:l]...)
			body = body[l:]
			if l < 255 {
				p.packets, pkt = append(p.packets, pkt), nil
			} else if i == nseg-1 {
				t.Fatalf("page %d: packet continues on the next page", len(pages))
			}
		}
		pages = append(pages, p)
		b = b[size:]
	}
	return pages
}

// checkOggOpus checks a whole Ogg Opus file against RFC 7845 and returns
// its pages: headers, sequence, flags, and granule positions counting
// 48 kHz samples with the pre-skip, the last trimmed to samples48k.
func checkOggOpus(t *testing.T, b []byte, inputRate int, samples48k int64) []oggPage {
	t.Helper()
	pages := parseOgg(t, b)
	if len(pages) < 3 {
		t.Fatalf("%d pages, want head, tags and audio", len(pages))
	}
	head := pages[0]
	if head.flags != oggFlagBOS || head.granule != 0 || len(head.packets) != 1 {
		t.Fatalf("head page: flags %#x granule %d packets %d", head.flags, head.granule, len(head.packets))
	}
	h := head.packets[0]
	preSkip := int64(binary.LittleEndian.Uint16(h[10:]))
	if len(h) != 19 || string(h[:8]) != "OpusHead" || h[8] != 1 || h[9] != 1 ||
		preSkip != int64(opusLookahead()) || preSkip == 0 ||
		binary.LittleEndian.Uint32(h[12:]) != uint32(inputRate) || h[16] != 0 || h[17] != 0 || h[18] != 0 {
		t.Fatalf("OpusHead % x (pre-skip %d, lookahead %d)", h, preSkip, opusLookahead())
	}
	tags := pages[1]
	if tags.flags != 0 || tags.granule != 0 || len(tags.packets) != 1 || !bytes.HasPrefix(tags.packets[0], []byte("OpusTags")) {
		t.Fatalf("tags page: flags %#x granule %d packets %d", tags.flags, tags.granule, len(tags.packets))
	}
	var packets int64
	for i, p := range pages {
		if p.serial != pages[0].serial || p.seq != uint32(i) {
			t.Fatalf("page %d: serial %x seq %d", i, p.serial, p.seq)
		}
		if i < 2 {
			continue
		}
		last := i == len(pages)-1
		if n := len(p.packets); n == 0 || n > OggOpusPagePackets {
			t.Fatalf("page %d: %d packets", i, n)
		}
		for _, pkt := range p.packets {
			// TOC byte: config 16-19 is CELT fullband, code 0 one frame;
			// the duration is what the granules count on.
			if samples := opusPacketSamples(pkt); samples != OpusFrameSamples {
				t.Fatalf("page %d: packet of %d samples", i, samples)
			}
		}
		packets += int64(len(p.packets))
		switch {
		case !last && (p.flags != 0 || p.granule != packets*OpusFrameSamples):
			t.Fatalf("page %d: flags %#x granule %d, want 0 and %d", i, p.flags, p.granule, packets*OpusFrameSamples)
		case last && (p.flags != oggFlagEOS || p.granule != preSkip+samples48k):
			t.Fatalf("last page: flags %#x granule %d, want EOS and %d", p.flags, p.granule, preSkip+samples48k)
		case last && packets*OpusFrameSamples-p.granule >= OpusFrameSamples:
			t.Fatalf("last page trims %d samples, more than its last packet", packets*OpusFrameSamples-p.granule)
		}
	}
	return pages
}

// opusPacketSamples is a one-frame packet's duration from its TOC byte
// (RFC 6716 3.1), at 48 kHz.
func opusPacketSamples(p []byte) int {
	if len(p) == 0 || p[0]&3 != 0 {
		return -1
	}
	config := int(p[0] >> 3)
	switch {
	case config < 12: // SILK: 10, 20, 40, 60 ms
		return []int{480, 960, 1920, 2880}[config%4]
	case config < 16: // hybrid: 10, 20 ms
		return []int{480, 960}[config%2]
	default: // CELT: 2.5, 5, 10, 20 ms
		return []int{120, 240, 480, 960}[config%4]
	}
}

// TestOggOpus: one second of voice-like audio at 22050 Hz becomes a valid
// Ogg Opus file; pages stream out during Write; it decodes back (libopusfile
// applies pre-skip and end trim) to the exact length, aligned in time.
func TestOggOpus(t *testing.T) {
	in := voiceLike(22050, 22050)
	for _, chunk := range []int{441, 22050} {
		p, writes, flush := stream(t, OggOpus, 22050, 24000, in, chunk)
		if p.Rate() != OpusRate {
			t.Fatalf("Rate() = %d", p.Rate())
		}
		var all []byte
		for _, u := range append(writes, flush...) {
			parseOgg(t, u) // every unit holds whole pages
			all = append(all, u...)
		}
		n := p.enc.(*OggOpusWriter).samples
		if n < 47990 || n > 48010 {
			t.Fatalf("%d samples at 48 kHz for one second", n)
		}
		pages := checkOggOpus(t, all, 22050, n)
		// Flush owes the page held back for the EOS flag, the resampler's
		// tail and the padding: at most 100 ms + 20 ms of packets, so no
		// more than three pages.
		if early := len(parseOgg(t, bytes.Join(writes, nil))); early < len(pages)-3 {
			t.Errorf("chunk %d: only %d of %d pages came before Flush", chunk, early, len(pages))
		}
		if len(writes) > 0 && len(parseOgg(t, writes[0])) < 2 {
			t.Errorf("chunk %d: first unit lacks the header pages", chunk)
		}

		got, rate, err := DecodeClip(all)
		if err != nil || rate != OpusRate {
			t.Fatalf("decode: %d Hz, %v", rate, err)
		}
		if d := int64(len(got)) - n; d != 0 {
			t.Errorf("chunk %d: decoded %d samples, wrote %d", chunk, len(got), n)
		}
		c, lag := bestCorrelation(voiceLike(48000, 48000), got, 200)
		if c < 0.9 || lag > 2 {
			t.Errorf("chunk %d: correlation %.3f at lag %d, want >= 0.9 at lag <= 2 (pre-skip wrong?)", chunk, c, lag)
		}
	}
}

// TestOggOpusTools: opusinfo (libogg's CRC and page checks, RFC 7845's
// header rules) finds nothing to warn about, and it and opusdec agree on
// the length, for a normal, a one-sample and an empty stream.
func TestOggOpusTools(t *testing.T) {
	for _, tool := range []string{"opusinfo", "opusdec"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/deps.sh installs opus-tools)", tool)
		}
	}
	for _, n := range []int{24000, 1, 0} {
		p, writes, flush := stream(t, OggOpus, 24000, 24000, voiceLike(n, 24000), 480)
		all := bytes.Join(append(writes, flush...), nil)
		checkOggOpus(t, all, 24000, p.enc.(*OggOpusWriter).samples)
		path := tempFile(t, "a.opus", all)
		info := string(run(t, "opusinfo", path))
		if regexp.MustCompile(`(?i)warning|error|corrupt|hole`).MatchString(info) {
			t.Errorf("%d samples: opusinfo complains:\n%s", n, info)
		}
		if !regexp.MustCompile(`Pre-skip: ` + strconv.Itoa(opusLookahead()) + `\b`).MatchString(info) {
			t.Errorf("opusinfo:\n%s", info)
		}
		m := regexp.MustCompile(`Playback length: (\d+)m:([\d.]+)s`).FindStringSubmatch(info)
		if m == nil {
			t.Fatalf("no playback length:\n%s", info)
		}
		secs, _ := strconv.ParseFloat(m[2], 64)
		if want := float64(n) / 24000; math.Abs(secs-want) > 0.001 || m[1] != "0" {
			t.Errorf("opusinfo length %sm:%ss, want %.3fs", m[1], m[2], want)
		}
		wav := tempFile(t, "a.wav", nil)
		run(t, "opusdec", "--quiet", "--rate", "48000", "--float", path, wav)
		s, rate, err := ReadWAV(bytes.NewReader(readFile(t, wav)))
		if err != nil || rate != 48000 {
			t.Fatalf("opusdec output: %d Hz, %v", rate, err)
		}
		if int64(len(s)) != p.enc.(*OggOpusWriter).samples {
			t.Errorf("opusdec: %d samples, wrote %d", len(s), p.enc.(*OggOpusWriter).samples)
		}
	}
}

// TestOggLacing: packets of 0, 254, 255, 510 and 4000 bytes round-trip
// through a page (a multiple of 255 ends with a zero lacing value), and
// fits refuses a packet that would pass 255 segments.
func TestOggLacing(t *testing.T) {
	s := newOggStream()
	var want [][]byte
	for i, n := range []int{0, 254, 255, 510, 4000} {
		pkt := bytes.Repeat([]byte{byte(i + 1)}, n)
		if !s.fits(n) {
			t.Fatalf("packet of %d does not fit", n)
		}
		s.add(pkt)
		want = append(want, pkt)
	}
	if len(s.segs) != 1+1+2+3+16 {
		t.Fatalf("%d segments", len(s.segs))
	}
	if s.fits(255*(oggMaxSegments-len(s.segs))) || !s.fits(255*(oggMaxSegments-len(s.segs))-1) {
		t.Fatal("fits is off by one")
	}
	pages := parseOgg(t, s.page(nil, 1234, true))
	if len(pages) != 1 || pages[0].granule != 1234 || pages[0].flags != oggFlagBOS|oggFlagEOS {
		t.Fatalf("pages %+v", pages)
	}
	for i := range want {
		if !bytes.Equal(pages[0].packets[i], want[i]) {
			t.Fatalf("packet %d: %d bytes back, %d in", i, len(pages[0].packets[i]), len(want[i]))
		}
	}
}

// TestOggOpusAfterFlush: Write after Flush fails, Flush again does nothing.
func TestOggOpusAfterFlush(t *testing.T) {
	w, err := NewOggOpusWriter(48000, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	emit := func(b []byte) error { out = append(out, b...); return nil }
	if err := w.Flush(emit); err != nil {
		t.Fatal(err)
	}
	n := len(out)
	if err := w.Flush(emit); err != nil || len(out) != n {
		t.Fatalf("second Flush: %v, %d more bytes", err, len(out)-n)
	}
	if err := w.Write(make([]float32, 960), emit); err == nil {
		t.Fatal("Write after Flush succeeded")
	}
	checkOggOpus(t, out, 48000, 0)
}
