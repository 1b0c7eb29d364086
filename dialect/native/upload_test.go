package native

import (
	"bytes"
	"mime/multipart"
	"os"
	"testing"
)

// TestPartsHashBoundary: an upload's idempotency fingerprint hashes its
// parts, so a retry that picks a new random boundary still matches.
func TestPartsHashBoundary(t *testing.T) {
	form := func() (string, []byte) {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf) // a new random boundary each time
		w.WriteField("consent", "true")
		f, _ := w.CreateFormFile("file", "a.wav")
		f.Write([]byte("RIFF...."))
		w.Close()
		return w.Boundary(), buf.Bytes()
	}
	hash := func(boundary string, body []byte) []byte {
		f, err := parseUpload(&partsReader{r: bytes.NewReader(body)}, boundary,
			func() (*os.File, error) { return os.CreateTemp(t.TempDir(), "clip") })
		if err != nil {
			t.Fatal(err)
		}
		f.clip.Close()
		return f.partsHash
	}
	b1, body1 := form()
	b2, body2 := form()
	if b1 == b2 || bytes.Equal(body1, body2) {
		t.Fatal("boundaries should differ")
	}
	if !bytes.Equal(hash(b1, body1), hash(b2, body2)) {
		t.Fatal("multipart fingerprints differ across boundaries")
	}
}
