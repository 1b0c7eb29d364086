package synth

import (
	"strings"
	"testing"

	"voicesvc/control"
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

// TestAdmitUpload: the server's slots, then each workspace's share of them;
// a refusal holds nothing, and release frees both (once).
func TestAdmitUpload(t *testing.T) {
	svc, err := NewService(Deps{Store: newFakeStore(), Engine: &fakeEngine{}, Meter: &fakeMeter{balance: 1}, MaxUploads: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	a, b := &control.Principal{WorkspaceID: "a"}, &control.Principal{WorkspaceID: "b"}
	steps := []struct {
		p    *control.Principal
		code string // "": admitted
	}{
		{a, ""}, {a, ""}, {a, control.EConcurrencyLimited}, // a's share of 8 is 2
		{b, ""}, {b, ""}, {b, control.EConcurrencyLimited},
	}
	var releases []func()
	for i, s := range steps {
		release, err := svc.AdmitUpload(s.p)
		if control.ErrorCode(err) != s.code && !(s.code == "" && err == nil) {
			t.Fatalf("step %d: %v, want %q", i, err, s.code)
		}
		if err == nil {
			releases = append(releases, release)
		}
	}
	if n := svc.UploadsInProgress(); n != 4 {
		t.Fatalf("%d slots held, want 4", n)
	}
	releases[0]()
	releases[0]()
	if n := svc.UploadsInProgress(); n != 3 {
		t.Fatalf("%d slots held after one release (twice), want 3", n)
	}
	if _, err := svc.AdmitUpload(a); err != nil {
		t.Fatalf("a's share did not free: %v", err)
	}
	// The server's slots: 8 workspaces of one upload each fill them.
	for i := 0; svc.UploadsInProgress() < 8; i++ {
		if _, err := svc.AdmitUpload(&control.Principal{WorkspaceID: string(rune('c' + i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.AdmitUpload(&control.Principal{WorkspaceID: "z"}); !control.IsCode(err, control.EUpstreamBusy) {
		t.Fatalf("a full server: %v, want upstream_busy", err)
	}
}
