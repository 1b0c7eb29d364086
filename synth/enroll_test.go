package synth

import (
	"strings"
	"testing"
)

func TestPlainlyText(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want bool
	}{
		{"csv", []byte("name,age\nalice,30\n"), true},
		{"utf-8 prose", []byte("Grüße, 世界!\r\n"), true},
		{"long text cut mid-rune", []byte(strings.Repeat("é", 2000)), true},
		{"wav", []byte("RIFF\x24\x00\x00\x00WAVEfmt "), false},
		{"flac", []byte("fLaC\x00\x00\x00\x22"), false},
		{"ogg", []byte("OggS\x00\x02\x00\x00"), false},
		{"id3", []byte("ID3\x04\x00\x00\x00\x00\x00\x00"), false},
		{"mp3 frame", []byte{0xff, 0xfb, 0x90, 0x64}, false},
		{"binary", []byte{0, 1, 2, 3}, false},
	}
	for _, c := range cases {
		if got := PlainlyText(c.b); got != c.want {
			t.Errorf("%s: PlainlyText = %v", c.name, got)
		}
	}
}

func TestValidMediaName(t *testing.T) {
	id := strings.Repeat("0", 24)
	for name, want := range map[string]bool{
		id + "-" + id + ".wav":     true,
		id + "-" + id + ".WAV":     false,
		id + "/" + id + ".wav":     false,
		"../" + id + "-" + id[3:]:  false,
		id + "-" + id + ".wav.tmp": false,
	} {
		if ValidMediaName(name) != want {
			t.Errorf("%q: want %v", name, want)
		}
	}
}

func TestUploadShareSize(t *testing.T) {
	for slots, want := range map[int]int{1: 1, 2: 2, 4: 2, 8: 2, 9: 2, 12: 3, 64: 16} {
		if got := UploadShare(slots); got != want {
			t.Errorf("UploadShare(%d) = %d, want %d", slots, got, want)
		}
	}
}
