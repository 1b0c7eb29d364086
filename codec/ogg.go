package codec

import (
	"encoding/binary"
	"math/rand/v2"
)

// Ogg framing (RFC 3533): a logical stream is a sequence of pages, each a
// 27-byte header, a table of lacing values (segment sizes, at most 255 of
// them) and the packets' bytes. A packet is cut into 255-byte segments and
// ends with a segment shorter than 255 (a zero one if it divides evenly).
const (
	oggHeaderLen   = 27
	oggMaxSegments = 255
	oggFlagBOS     = 0x02 // first page of the logical stream
	oggFlagEOS     = 0x04 // last page
)

// oggCRC is Ogg's CRC-32: polynomial 0x04C11DB7, most significant bit
// first, initial value 0, no final inversion. hash/crc32 only does the
// reflected (IEEE, Castagnoli) forms, so the table is ours.
var oggCRC = func() (t [256]uint32) {
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04C11DB7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return t
}()

func oggChecksum(page []byte) uint32 {
	var crc uint32
	for _, b := range page {
		crc = crc<<8 ^ oggCRC[byte(crc>>24)^b]
	}
	return crc
}

// oggStream builds the pages of one logical stream. Packets go into the
// open page with add; page closes it into dst. Buffers are reused, so a
// warm stream does not allocate.
type oggStream struct {
	serial  uint32
	seq     uint32 // page sequence number of the next page
	segs    []byte // lacing values of the open page
	body    []byte // packet bytes of the open page
	packets int    // packets in the open page
	started bool   // the BOS page is written
}

func newOggStream() oggStream {
	// A random serial lets the file be chained or multiplexed with
	// another stream later without a clash, as the spec asks.
	return oggStream{serial: rand.Uint32(), segs: make([]byte, 0, oggMaxSegments), body: make([]byte, 0, 4096)}
}

// fits reports whether a packet of n bytes still fits in the open page.
func (s *oggStream) fits(n int) bool { return len(s.segs)+n/255+1 <= oggMaxSegments }

// add appends one whole packet to the open page; the caller checks fits.
func (s *oggStream) add(packet []byte) {
	for n := len(packet); ; n -= 255 {
		if n < 255 {
			s.segs = append(s.segs, byte(n))
			break
		}
		s.segs = append(s.segs, 255)
	}
	s.body = append(s.body, packet...)
	s.packets++
}

// page appends the open page to dst with the granule position (the codec's
// sample count at the end of its last packet) and empties it.
func (s *oggStream) page(dst []byte, granule int64, eos bool) []byte {
	var flags byte
	if !s.started {
		flags |= oggFlagBOS
		s.started = true
	}
	if eos {
		flags |= oggFlagEOS
	}
	start := len(dst)
	dst = append(dst, 'O', 'g', 'g', 'S', 0, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(granule))
	dst = binary.LittleEndian.AppendUint32(dst, s.serial)
	dst = binary.LittleEndian.AppendUint32(dst, s.seq)
	dst = append(dst, 0, 0, 0, 0, byte(len(s.segs))) // CRC filled below
	dst = append(dst, s.segs...)
	dst = append(dst, s.body...)
	binary.LittleEndian.PutUint32(dst[start+22:], oggChecksum(dst[start:]))
	s.seq++
	s.segs, s.body, s.packets = s.segs[:0], s.body[:0], 0
	return dst
}
