package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Clone clips are rendered at test time with the espeak-ng CLI (several
// voices and pitches), converted with sox (WAV, MP3, FLAC) and opusenc
// (Ogg Opus: this sox has no Opus writer), once per test binary.

var (
	clOnce  sync.Once
	clDir   string
	clErr   error
	clMu    sync.Mutex
	clMade  = map[string]string{}
	clTexts = map[string]string{
		"en": "The old lighthouse keeper walked along the shore every morning, counting the boats that came back from the sea. " +
			"He remembered the names of all the sailors, and he waved to each of them as they passed. " +
			"When the weather turned bad, he lit the lamp early and waited until every boat was safely home.",
	}
)

// clClip returns the path of a clip made once: espeak-ng voice and pitch
// speaking text, post-processed by sox effects, in container ext (wav,
// mp3, flac, opus).
func clClip(t testing.TB, voice string, pitch int, text, ext string, effects ...string) string {
	t.Helper()
	for _, tool := range []string{"espeak-ng", "sox", "opusenc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	clOnce.Do(func() { clDir, clErr = os.MkdirTemp("", "voicesvc-e2e-clips-") })
	if clErr != nil {
		t.Fatal(clErr)
	}
	key := fmt.Sprintf("%s|%d|%s|%s|%s", voice, pitch, text, ext, strings.Join(effects, " "))
	clMu.Lock()
	defer clMu.Unlock()
	if p, ok := clMade[key]; ok {
		return p
	}
	base := filepath.Join(clDir, fmt.Sprintf("c%d", len(clMade)))
	raw, wav := base+"-raw.wav", base+".wav"
	clRun(t, "espeak-ng", "-v", voice, "-p", fmt.Sprint(pitch), "-w", raw, text)
	clRun(t, "sox", append([]string{raw, "-b", "16", wav}, effects...)...)
	out := wav
	switch ext {
	case "wav":
	case "mp3", "flac":
		out = base + "." + ext
		clRun(t, "sox", wav, out)
	case "opus":
		out = base + ".opus"
		clRun(t, "opusenc", "--quiet", wav, out)
	default:
		t.Fatalf("unknown container %s", ext)
	}
	clMade[key] = out
	return out
}

// clSox makes a clip from sox alone (silence, noise): args are the sox
// arguments after "-n <out>".
func clSox(t testing.TB, name string, args ...string) string {
	t.Helper()
	clClip(t, "en", 50, "x", "wav") // makes clDir; cached after the first call
	out := filepath.Join(clDir, name+".wav")
	if _, err := os.Stat(out); err != nil {
		clRun(t, "sox", append([]string{"-n", "-r", "22050", "-b", "16", "-c", "1", out}, args...)...)
	}
	return out
}

func clRun(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func clRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// clForm is a multipart upload: fields in order, then the file (if any).
type clForm struct {
	fields   [][2]string
	file     []byte
	filename string
}

func (f clForm) encode() (body []byte, contentType string) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	for _, kv := range f.fields {
		w.WriteField(kv[0], kv[1])
	}
	if f.file != nil {
		name := f.filename
		if name == "" {
			name = "clip.bin"
		}
		fw, _ := w.CreateFormFile("file", name)
		fw.Write(f.file)
	}
	w.Close()
	return buf.Bytes(), w.FormDataContentType()
}

// clReply is a decoded JSON answer.
type clReply struct {
	status int
	header http.Header
	body   map[string]any
	raw    []byte
}

func (r *clReply) data() map[string]any {
	d, _ := r.body["data"].(map[string]any)
	return d
}

func clDo(t testing.TB, method, url, key, contentType string, body []byte, hdr ...string) *clReply {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &clReply{status: resp.StatusCode, header: resp.Header, raw: raw}
	json.Unmarshal(raw, &r.body)
	return r
}

func clUpload(t testing.TB, url, key string, f clForm, hdr ...string) *clReply {
	t.Helper()
	body, ct := f.encode()
	return clDo(t, "POST", url, key, ct, body, hdr...)
}

func clJSON(t testing.TB, method, url, key string, v any) *clReply {
	t.Helper()
	b, _ := json.Marshal(v)
	return clDo(t, method, url, key, "application/json", b)
}

// clWant fails unless r has status and (when code != "") that error code.
func clWant(t testing.TB, what string, r *clReply, status int, code string) {
	t.Helper()
	if r.status != status || code != "" && r.body["code"] != code {
		t.Errorf("%s: got %d %s, want %d %s", what, r.status, r.raw, status, code)
	}
}

// clCloneForm is a valid clone upload of clip.
func clCloneForm(name string, clip []byte, extra ...[2]string) clForm {
	f := clForm{fields: [][2]string{{"name", name}, {"language", "en"}, {"consent", "true"}}, file: clip, filename: "ref.wav"}
	f.fields = append(f.fields, extra...)
	return f
}

// clStartClone posts a clone and returns the voice id and job id.
func clStartClone(t testing.TB, api, key, name string, clip []byte) (voiceID, jobID string) {
	t.Helper()
	r := clUpload(t, api+"/voices/clone", key, clCloneForm(name, clip))
	if r.status != 202 {
		t.Fatalf("clone %s: %d %s", name, r.status, r.raw)
	}
	v := r.data()["voice"].(map[string]any)
	if v["status"] != "processing" {
		t.Fatalf("clone %s: voice status %v, want processing", name, v["status"])
	}
	return v["id"].(string), r.data()["job_id"].(string)
}

// clWaitJob polls the job until it is terminal (or timeout) and returns it.
func clWaitJob(t testing.TB, api, key, jobID string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		r := clDo(t, "GET", api+"/jobs/"+jobID, key, "", nil)
		if r.status != 200 {
			t.Fatalf("GET job %s: %d %s", jobID, r.status, r.raw)
		}
		j := r.data()
		switch j["status"] {
		case "succeeded", "failed", "cancelled", "expired":
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %v after %v", jobID, j["status"], timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func clVoice(t testing.TB, api, key, id string) map[string]any {
	t.Helper()
	r := clDo(t, "GET", api+"/voices/"+id, key, "", nil)
	if r.status != 200 {
		t.Fatalf("GET voice %s: %d %s", id, r.status, r.raw)
	}
	return r.data()["voice"].(map[string]any)
}
