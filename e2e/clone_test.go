package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// Every refusal of an enroll or clone upload, with its status and code.
func TestCloneUploadRefusals(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	ws, key := harness.Workspace(t, srv.DB, "pro")
	clip := clRead(t, clClip(t, "en+m3", 50, clTexts["en"], "wav"))
	clone := srv.API + "/voices/clone"

	r := clJSON(t, "POST", srv.API+"/voices", key, map[string]any{"name": "draft", "consent": true})
	if r.status != 201 {
		t.Fatalf("create draft: %d %s", r.status, r.raw)
	}
	draft := r.data()["voice"].(map[string]any)["id"].(string)
	enroll := srv.API + "/voices/" + draft + "/enroll"
	ok := [][2]string{{"consent", "true"}}

	big := make([]byte, 20<<20+1)
	copy(big, clip)
	cases := []struct {
		name   string
		url    string
		form   clForm
		status int
		code   string
	}{
		{"no consent", enroll, clForm{file: clip}, 400, "consent_required"},
		{"consent false", enroll, clForm{fields: [][2]string{{"consent", "false"}}, file: clip}, 400, "consent_required"},
		{"clone no consent", clone, clForm{fields: [][2]string{{"name", "x"}}, file: clip}, 400, "consent_required"},
		{"no file", enroll, clForm{fields: ok}, 400, "file_required"},
		{"empty file", enroll, clForm{fields: ok, file: []byte{}}, 400, "file_required"},
		{"file over 20 MiB", enroll, clForm{fields: ok, file: big}, 400, "file_too_large"},
		{"ref_text 4001", enroll, clForm{fields: append(ok, [2]string{"ref_text", strings.Repeat("é", 4001)}), file: clip}, 400, "ref_text_too_long"},
		{"text file", enroll, clForm{fields: ok, file: []byte("name,age\nalice,30\n")}, 400, "invalid_request"},
		{"bad language", enroll, clForm{fields: append(ok, [2]string{"language", "12"}), file: clip}, 400, "invalid_language"},
		{"clone without name", clone, clForm{fields: ok, file: clip}, 400, "invalid_request"},
		{"clone bad labels", clone, clCloneForm("x", clip, [2]string{"labels", "{"}), 400, "invalid_request"},
		{"unknown voice", srv.API + "/voices/" + strings.Repeat("a", 24) + "/enroll", clForm{fields: ok, file: clip}, 404, "not_found"},
		{"malformed id", srv.API + "/voices/xyz/enroll", clForm{fields: ok, file: clip}, 404, "not_found"},
	}
	for _, c := range cases {
		clWant(t, c.name, clUpload(t, c.url, key, c.form), c.status, c.code)
	}
	clWant(t, "JSON body", clJSON(t, "POST", enroll, key, map[string]any{"consent": true}), 400, "invalid_request")

	// A catalog voice belongs to another workspace: 404, not 409.
	r = clDo(t, "GET", srv.API+"/voices?page_size=1&visibility=public", key, "", nil)
	pub := r.data()["voices"].([]any)[0].(map[string]any)["id"].(string)
	clWant(t, "public voice", clUpload(t, srv.API+"/voices/"+pub+"/enroll", key, clForm{fields: ok, file: clip}), 404, "not_found")

	// Scope clone is required.
	k := harness.Admin(t, srv.DB, "key", "create", "--workspace", ws, "--scopes", "tts,voices:read,voices:write")
	clWant(t, "no clone scope", clUpload(t, enroll, k["key"].(string), clForm{fields: ok, file: clip}), 403, "insufficient_scope")

	// A 4,000-character ref_text is accepted; the voice is then busy.
	r = clUpload(t, enroll, key, clForm{fields: append(ok, [2]string{"ref_text", strings.Repeat("é", 4000)}), file: clip})
	clWant(t, "ref_text 4000", r, 202, "")
	if r.data()["job_id"] == nil || r.data()["voice"].(map[string]any)["status"] != "processing" {
		t.Errorf("enroll answer %s", r.raw)
	}
	clWant(t, "enroll while processing", clUpload(t, enroll, key, clForm{fields: ok, file: clip}), 409, "voice_busy")

	// Over 21 MiB in all: 413 before the handler.
	// (The client announces the length; the server answers from the
	// headers and closes, so the body is never sent.)
	if got := clAnnounce(t, srv.Addr, key, enroll[len(srv.URL):], 21<<20+1); !strings.HasPrefix(got, "HTTP/1.1 413") ||
		!strings.Contains(got, `"code":"payload_too_large"`) {
		t.Errorf("body over 21 MiB: got %q", got)
	}
}

// clAnnounce sends only the headers of a multipart POST announcing size
// bytes and returns what the server answers.
func clAnnounce(t testing.TB, addr, key, path string, size int) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"+
		"Content-Type: multipart/form-data; boundary=xyz\r\nContent-Length: %d\r\n\r\n", path, key, size)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, _ := io.ReadAll(conn)
	return string(b)
}

// A 100 MiB upload is refused with 413 after at most the cap was read:
// the server's peak memory stays far below the body size, whether the
// client announces the length or sends chunks.
func TestCloneBodyLimitStopsEarly(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	const total = 100 << 20
	for _, chunked := range []bool{false, true} {
		before := clPeakRSS(t, srv.PID())
		// One file part that goes on and on: the body is refused for its
		// size, not as a malformed form.
		src := &clZeros{left: total}
		var body io.Reader = io.MultiReader(strings.NewReader(
			"--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n"), src)
		req, _ := http.NewRequest("POST", srv.API+"/voices/clone", body)
		if !chunked {
			req.ContentLength = total
		} else {
			req.ContentLength = -1
		}
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=xyz")
		resp, err := http.DefaultClient.Do(req)
		status := 0
		if err == nil {
			status = resp.StatusCode
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		sent := total - src.left
		after := clPeakRSS(t, srv.PID())
		t.Logf("chunked=%v: status %d err %v; client sent %.1f MiB of 100; server peak RSS %.1f -> %.1f MiB",
			chunked, status, err, float64(sent)/(1<<20), float64(before)/(1<<20), float64(after)/(1<<20))
		if err == nil && status != 413 {
			t.Errorf("chunked=%v: status %d, want 413", chunked, status)
		}
		if sent > 60<<20 {
			t.Errorf("chunked=%v: the server read %d MiB before refusing", chunked, sent>>20)
		}
		// Bounded by the 21 MiB cap, not by the body (the body streams
		// to a temporary file).
		if after-before > 80<<20 {
			t.Errorf("chunked=%v: server peak RSS grew by %d MiB", chunked, (after-before)>>20)
		}
	}
	// The announced-length case is refused from the headers alone, with
	// a proper 413 envelope.
	if got := clAnnounce(t, srv.Addr, key, "/voice-svc/api/v1/public/voices/clone", total); !strings.HasPrefix(got, "HTTP/1.1 413") ||
		!strings.Contains(got, "payload_too_large") {
		t.Errorf("100 MiB announced, no body sent: got %q", got)
	}
}

// clZeros yields left zero bytes without holding them.
type clZeros struct{ left int }

func (z *clZeros) Read(p []byte) (int, error) {
	if z.left == 0 {
		return 0, io.EOF
	}
	n := min(len(p), z.left)
	clear(p[:n])
	z.left -= n
	return n, nil
}

// clPeakRSS is the process's peak resident set (VmHWM), in bytes.
func clPeakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}
