package codec

// G.711 (ITU-T, "Pulse code modulation of voice frequencies"): one byte per
// sample, a sign bit, a 3-bit segment (exponent) and a 4-bit step within the
// segment. mu-law (North America, Japan) carries 14 bits of linear range,
// A-law (everywhere else) 13; both give about 38 dB of SNR on speech at any
// level, which is what a phone line carries.
//
// Samples are rounded to nearest (halves up) at 14 bits for mu-law or 13
// for A-law and clipped, as sox does, then companded with the segment
// algorithms of the Sun reference implementation that sox and most
// telephony stacks share, so the bytes equal sox's for the same 16-bit
// input (the tests check all 65,536 values). Rounding the float straight
// to 14 or 13 bits, rather than to 16 first, avoids a double rounding.
// The algorithms fill one table per law at start (16 KiB and 8 KiB), and
// the encode loop is a quantize plus a table load per sample.

// G.711 mu-law constants: the bias added before the segment search, and the
// largest 14-bit magnitude that does not overflow the top segment.
const (
	muLawBias = 0x84 >> 2 // 33 in 14-bit units
	muLawClip = 8159
)

// muLawSegEnd and aLawSegEnd are the upper bounds of each segment's input.
var (
	muLawSegEnd = [8]int{0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF, 0x1FFF}
	aLawSegEnd  = [8]int{0x1F, 0x3F, 0x7F, 0xFF, 0x1FF, 0x3FF, 0x7FF, 0xFFF}
)

func segment(v int, ends *[8]int) int {
	for i, e := range ends {
		if v <= e {
			return i
		}
	}
	return 8
}

// muLawEncode14 compands a 14-bit signed value.
func muLawEncode14(v int) byte {
	mask := 0xFF
	if v < 0 {
		v, mask = -v, 0x7F
	}
	v = min(v, muLawClip) + muLawBias
	seg := segment(v, &muLawSegEnd)
	if seg >= 8 {
		return byte(0x7F ^ mask)
	}
	return byte((seg<<4 | (v>>(seg+1))&0xF) ^ mask)
}

// aLawEncode13 compands a 13-bit signed value. Negative magnitudes are
// one's complements (-1 is the smallest), so A-law has no negative zero,
// unlike mu-law.
func aLawEncode13(v int) byte {
	mask := 0xD5
	if v < 0 {
		v, mask = -v-1, 0x55
	}
	seg := segment(v, &aLawSegEnd)
	if seg >= 8 {
		return byte(0x7F ^ mask)
	}
	step := v >> seg
	if seg < 2 {
		step = v >> 1
	}
	return byte((seg<<4 | step&0xF) ^ mask)
}

// muLawDecode16 and aLawDecode16 expand a code to the 16-bit value at the
// middle of its step.
func muLawDecode16(u byte) int16 {
	u = ^u
	t := (int(u&0x0F)<<3 + 0x84) << ((u & 0x70) >> 4)
	if u&0x80 != 0 {
		return int16(0x84 - t)
	}
	return int16(t - 0x84)
}

func aLawDecode16(a byte) int16 {
	a ^= 0x55
	t := int(a&0x0F) << 4
	switch seg := int(a&0x70) >> 4; seg {
	case 0:
		t += 8
	case 1:
		t += 0x108
	default:
		t = (t + 0x108) << (seg - 1)
	}
	if a&0x80 != 0 {
		return int16(t)
	}
	return int16(-t)
}

// The tables, indexed by the rounded sample plus half the range (8192 for
// mu-law, 4096 for A-law), and the 256-entry expansions to float32.
var (
	muLawTable [1 << 14]byte
	aLawTable  [1 << 13]byte
	muLawFloat [256]float32
	aLawFloat  [256]float32
)

func init() {
	for i := range muLawTable {
		muLawTable[i] = muLawEncode14(i - 1<<13)
	}
	for i := range aLawTable {
		aLawTable[i] = aLawEncode13(i - 1<<12)
	}
	for i := range 256 {
		muLawFloat[i] = float32(muLawDecode16(byte(i))) / (1 << 15)
		aLawFloat[i] = float32(aLawDecode16(byte(i))) / (1 << 15)
	}
}

// putMuLaw and putALaw encode one byte per sample: the sample rounded to
// 14 (mu-law) or 13 (A-law) bits, as an offset index into the table. In
// range, that is the fast rounding of o16 at the smaller scale; the rest
// (clipping, NaN) goes through quantize.
func putMuLaw(out []byte, s []float32) {
	const lim = 1 - 1.0/(1<<14)
	out = out[:len(s)]
	for i, x := range s {
		var v int64
		if x > -lim && x < lim {
			v = int64(float64(x)*(1<<13) + (1<<13 + 0.5))
		} else {
			v = quantize(x, 1<<13) + 1<<13
		}
		out[i] = muLawTable[v&(1<<14-1)]
	}
}

func putALaw(out []byte, s []float32) {
	const lim = 1 - 1.0/(1<<13)
	out = out[:len(s)]
	for i, x := range s {
		var v int64
		if x > -lim && x < lim {
			v = int64(float64(x)*(1<<12) + (1<<12 + 0.5))
		} else {
			v = quantize(x, 1<<12) + 1<<12
		}
		out[i] = aLawTable[v&(1<<13-1)]
	}
}

func getMuLaw(out []float32, b []byte) { decodeG711(out, b, &muLawFloat) }
func getALaw(out []float32, b []byte)  { decodeG711(out, b, &aLawFloat) }

func decodeG711(out []float32, b []byte, table *[256]float32) {
	b = b[:len(out)]
	for i, c := range b {
		out[i] = table[c]
	}
}
