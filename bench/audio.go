package bench

import (
	"bytes"
	"encoding/binary"
	"net/http"
	"strconv"
	"strings"
)

// audioKind says how to turn response bytes into seconds of audio.
type audioKind struct {
	format    string // s16le ... f64le, pcm, wav, mp3
	fixedRate int    // rate fixed by contract (compat pcm), 0 = from headers/request
}

// bytesPerSample of a raw PCM format; 0 for containers and unknown names.
func bytesPerSample(format string) int {
	switch strings.ToLower(format) {
	case "s16le", "pcm":
		return 2
	case "s24le":
		return 3
	case "s32le", "f32le":
		return 4
	case "f64le":
		return 8
	}
	return 0
}

// pcmSeconds is the duration of n bytes of mono PCM.
func pcmSeconds(n int64, bps, rate int) float64 {
	if bps <= 0 || rate <= 0 {
		return 0
	}
	return float64(n) / float64(bps*rate)
}

// audioCounter measures audio as the body streams past without keeping it,
// except the WAV header prefix and MP3 bodies (frame walking needs them; MP3
// is a few KB per second).
type audioCounter struct {
	kind  audioKind
	bps   int
	rate  int
	n     int64
	head  []byte // wav: first bytes; mp3: the whole body up to a cap
	limit int
}

const mp3BodyCap = 32 << 20

func newAudioCounter(kind audioKind, h http.Header, reqRate int) *audioCounter {
	c := &audioCounter{kind: kind}
	format := kind.format
	if f := h.Get("X-Audio-Format"); f != "" && kind.format != "wav" && kind.format != "mp3" {
		format = f
	}
	c.bps = bytesPerSample(format)
	c.rate = kind.fixedRate
	if r, err := strconv.Atoi(h.Get("X-Sample-Rate")); err == nil && r > 0 {
		c.rate = r
	}
	if c.rate == 0 {
		c.rate = reqRate
	}
	if c.rate == 0 {
		c.rate = 24000
	}
	switch kind.format {
	case "wav":
		c.limit = 4 << 10
	case "mp3":
		c.limit = mp3BodyCap
	}
	return c
}

func (c *audioCounter) write(p []byte) {
	c.n += int64(len(p))
	if room := c.limit - len(c.head); room > 0 {
		c.head = append(c.head, p[:min(room, len(p))]...)
	}
}

func (c *audioCounter) seconds() float64 {
	switch c.kind.format {
	case "wav":
		return wavSeconds(c.head, c.n)
	case "mp3":
		return mp3Seconds(c.head)
	}
	return pcmSeconds(c.n, c.bps, c.rate)
}

// wavSeconds reads the fmt chunk from head and counts every byte after the
// data chunk header as audio: a streamed WAV may carry a placeholder size.
func wavSeconds(head []byte, total int64) float64 {
	if len(head) < 12 || string(head[:4]) != "RIFF" || string(head[8:12]) != "WAVE" {
		return 0
	}
	var byteRate int
	for off := 12; off+8 <= len(head); {
		id := string(head[off : off+4])
		size := int(binary.LittleEndian.Uint32(head[off+4 : off+8]))
		body := off + 8
		switch id {
		case "fmt ":
			if body+16 > len(head) {
				return 0
			}
			byteRate = int(binary.LittleEndian.Uint32(head[body+8 : body+12]))
		case "data":
			if byteRate <= 0 {
				return 0
			}
			return float64(total-int64(body)) / float64(byteRate)
		}
		off = body + size + size%2
	}
	return 0
}

var (
	mp3Bitrates = [2][16]int{
		{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 0}, // MPEG-1 layer III
		{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160, 0},     // MPEG-2/2.5 layer III
	}
	mp3Rates = map[int][3]int{3: {44100, 48000, 32000}, 2: {22050, 24000, 16000}, 0: {11025, 12000, 8000}}
)

// mp3Seconds walks MPEG layer III frame headers (no decoding): every frame
// holds 1152 (MPEG-1) or 576 (MPEG-2/2.5) samples. It skips an ID3v2 tag and a
// leading Xing/Info frame, which carries no audio, and resyncs byte by byte
// over garbage.
func mp3Seconds(b []byte) float64 {
	i := 0
	if len(b) >= 10 && string(b[:3]) == "ID3" {
		i = 10 + (int(b[6]&0x7f)<<21 | int(b[7]&0x7f)<<14 | int(b[8]&0x7f)<<7 | int(b[9]&0x7f))
	}
	var secs float64
	first := true
	for i+4 <= len(b) {
		h := b[i : i+4]
		version, layer := int(h[1]>>3)&3, int(h[1]>>1)&3
		if h[0] != 0xff || h[1]&0xe0 != 0xe0 || version == 1 || layer != 1 {
			i++
			continue
		}
		brIdx, srIdx, pad := int(h[2]>>4), int(h[2]>>2)&3, int(h[2]>>1)&1
		table, spf, coef := 0, 1152, 144000
		if version != 3 {
			table, spf, coef = 1, 576, 72000
		}
		br := mp3Bitrates[table][brIdx]
		if br == 0 || srIdx == 3 {
			i++
			continue
		}
		rate := mp3Rates[version][srIdx]
		size := coef*br/rate + pad
		frame := b[i:min(i+size, len(b))]
		info := first && (bytes.Contains(frame[:min(64, len(frame))], []byte("Xing")) ||
			bytes.Contains(frame[:min(64, len(frame))], []byte("Info")))
		if !info {
			secs += float64(spf) / float64(rate)
		}
		first = false
		i += size
	}
	return secs
}
