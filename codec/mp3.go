package codec

// Defaults of the MP3 encoder: constant bitrate suits streaming, where a
// VBR header cannot be rewritten after the bytes are sent.
const (
	DefaultMP3Bitrate = 64 // kbit/s
	DefaultMP3Quality = 5  // LAME's 0 (best, slowest) to 9
)

// mp3Rates are the sample rates MPEG-1 and MPEG-2 layer III carry. The
// unofficial MPEG-2.5 rates (8000-12000) are left out: several decoders,
// go-mp3 among them, refuse them, so such requests get 16000.
var mp3Rates = [...]int{16000, 22050, 24000, 32000, 44100, 48000}

// CBR bitrates (kbit/s) of layer III in MPEG-1 (32000 Hz and up) and
// MPEG-2 (below): LAME would silently round anything else.
var (
	mp3BitratesV1 = []int{32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	mp3BitratesV2 = []int{8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
)

func validMP3Bitrate(rate, kbps int) bool {
	table := mp3BitratesV2
	if rate >= 32000 {
		table = mp3BitratesV1
	}
	for _, b := range table {
		if b == kbps {
			return true
		}
	}
	return false
}

// MP3Rate returns the MP3 sample rate to encode at for a requested rate:
// the rate itself when MP3 carries it, otherwise the next higher one (so no
// bandwidth is lost), or 48000 above that.
func MP3Rate(rate int) int {
	for _, r := range mp3Rates {
		if r >= rate {
			return r
		}
	}
	return mp3Rates[len(mp3Rates)-1]
}

func isMP3Rate(rate int) bool { return MP3Rate(rate) == rate }

// newMP3Stream is the registry's constructor: CBR MP3 at the default
// bitrate (ErrNoMP3 in builds tagged nomp3).
func newMP3Stream(c EncoderConfig) (Encoder, error) {
	e, err := NewMP3Encoder(c.Rate, 0)
	if err != nil {
		return nil, err
	}
	return &appendEncoder{a: e}, nil
}
