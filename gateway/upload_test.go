package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/synth"
)

// newConfigServer is newTestServer with a Config of the test's own.
func newConfigServer(t *testing.T, cfg Config) *testServer {
	t.Helper()
	ts := &testServer{t: t, store: openStore(t, filepath.Join(t.TempDir(), "voicesvc.db"))}
	ts.serve(cfg, Deps{Store: ts.store, Logger: slog.New(slog.DiscardHandler)})
	ts.ws = ts.workspace("pro")
	ts.key = ts.newKey(ts.ws.ID, nil, 0, false)
	return ts
}

// cloneForm is a clone form with a WAV-looking clip of n bytes.
func cloneForm(n int, name string) (contentType string, body []byte) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	w.WriteField("name", name)
	w.WriteField("consent", "true")
	fw, _ := w.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF\x24\x00\x00\x00WAVEfmt "))
	fw.Write(make([]byte, max(n-16, 0)))
	w.Close()
	return w.FormDataContentType(), buf.Bytes()
}

// zeroReader yields n zero bytes without holding them.
type zeroReader struct{ n int }

func (z *zeroReader) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), z.n)
	clear(p[:k])
	z.n -= k
	return k, nil
}

// A body over its limit is answered (413, or 401 without a key) while the
// client is still sending it, and the client reads that answer: the server
// reads and drops the rest before closing. It used to close the socket at
// once, and clients saw "connection reset by peer" instead of the 413.
func TestOversizedBodyAnswerReachesClient(t *testing.T) {
	ts := newTestServer(t, "")
	const upload = 22 << 20
	for _, tc := range []struct {
		name, path, key, contentType string
		size                         int
		chunked                      bool
		status                       int
		code                         string
	}{
		{"clone announced", "/voices/clone", ts.key, "multipart/form-data; boundary=x", upload, false, 413, control.EPayloadTooLarge},
		{"clone chunked", "/voices/clone", ts.key, "multipart/form-data; boundary=x", upload, true, 413, control.EPayloadTooLarge},
		{"enroll announced", "/voices/" + control.NewID() + "/enroll", ts.key, "multipart/form-data; boundary=x", upload, false, 413, control.EPayloadTooLarge},
		{"clone without key", "/voices/clone", "", "multipart/form-data; boundary=x", 20 << 20, false, 401, ""},
		{"json announced", "/voices", ts.key, "application/json", 4 << 20, false, 413, control.EPayloadTooLarge},
		{"json chunked", "/voices", ts.key, "application/json", 4 << 20, true, 413, control.EPayloadTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A form whose file part goes on past every limit.
			prefix := "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n"
			var body io.Reader = &zeroReader{n: tc.size}
			if strings.HasPrefix(tc.contentType, "multipart/") {
				body = io.MultiReader(strings.NewReader(prefix), &zeroReader{n: tc.size - len(prefix)})
			}
			req, _ := http.NewRequest("POST", ts.base+APIRoot+tc.path, body)
			req.ContentLength = int64(tc.size)
			if tc.chunked {
				req.ContentLength = -1
			}
			req.Header.Set("Content-Type", tc.contentType)
			if tc.key != "" {
				req.Header.Set("X-API-Key", tc.key)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			r := &response{status: resp.StatusCode, header: resp.Header, api: true}
			r.body, _ = io.ReadAll(resp.Body)
			if err := json.Unmarshal(r.body, &r.json); err != nil {
				t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
			}
			r.failure(t, tc.status, tc.code)
		})
	}
}

// The key is checked before the body is read: a client without one that
// announces 20 MB and sends one byte is answered at once (it used to wait
// until the body came or the read timed out, holding the body's memory).
func TestUploadAuthenticatedBeforeBody(t *testing.T) {
	ts := newTestServer(t, "")
	for _, key := range []string{"", "vsk_0000000000000000000000000000000000000000"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "POST %s/voices/clone HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\n"+
			"Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 20000000\r\n\r\n-", APIRoot, key)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != 401 || !resp.Close {
			t.Fatalf("key %q: status %d, connection kept: %v", key, resp.StatusCode, !resp.Close)
		}
	}
}

// holdUpload starts an upload that sends part of its body and stops; it
// returns once the server is receiving it (it holds an upload slot).
func holdUpload(t *testing.T, ts *testServer, held int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	ct, body := cloneForm(64<<10, "held")
	fmt.Fprintf(conn, "POST %s/voices/clone HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		APIRoot, ts.key, ct, len(body))
	conn.Write(body[:32<<10])
	if _, ok := waitFor(10*time.Second, func() bool { return ts.srv.core.UploadsInProgress() == held }); !ok {
		t.Fatalf("%d uploads in progress, want %d", ts.srv.core.UploadsInProgress(), held)
	}
	return conn
}

// At most MaxUploads bodies are received at once; the next upload is
// refused before its body with 503 upstream_busy and Retry-After. A client
// that goes away frees its slot. No temporary file outlives its request,
// and none is ever visible in the upload directory.
func TestUploadSlots(t *testing.T) {
	dir := t.TempDir()
	ts := newConfigServer(t, Config{MaxUploads: 2, UploadDir: dir})
	a := holdUpload(t, ts, 1)
	b := holdUpload(t, ts, 2)
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("upload files visible in %s: %v", dir, names)
	}
	ct, body := cloneForm(1000, "third")
	r := ts.do("POST", "/voices/clone", ts.key, body, "Content-Type", ct)
	r.failure(t, 503, control.EUpstreamBusy)
	if r.header.Get("Retry-After") != "5" {
		t.Errorf("Retry-After %q", r.header.Get("Retry-After"))
	}
	a.Close()
	b.Close()
	if _, ok := waitFor(10*time.Second, func() bool { return ts.srv.core.UploadsInProgress() == 0 }); !ok {
		t.Fatalf("%d upload slots still held", ts.srv.core.UploadsInProgress())
	}
	ts.do("POST", "/voices/clone", ts.key, body, "Content-Type", ct).data(t, 202)
	if n := openUploadFiles(t); n != 0 {
		t.Fatalf("%d upload files still open", n)
	}
}

// A body that stops arriving for UploadIdleTimeout is answered 400 and
// dropped, and its slot and file are freed.
func TestUploadStalled(t *testing.T) {
	ts := newConfigServer(t, Config{UploadIdleTimeout: 300 * time.Millisecond})
	c := holdUpload(t, ts, 1)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "timed out") || !resp.Close {
		t.Fatalf("stalled upload: %d %s (close %v)", resp.StatusCode, b, resp.Close)
	}
	if _, ok := waitFor(10*time.Second, func() bool { return ts.srv.core.UploadsInProgress() == 0 }); !ok {
		t.Fatalf("%d upload slots still held", ts.srv.core.UploadsInProgress())
	}
	if n := openUploadFiles(t); n != 0 {
		t.Fatalf("%d upload files still open", n)
	}
}

// openUploadFiles counts this process's descriptors on upload files.
func openUploadFiles(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if target, _ := os.Readlink("/proc/self/fd/" + fd.Name()); strings.Contains(target, "voicesvc-upload-") {
			n++
		}
	}
	return n
}

// An upload is received whole: a clip near the 20 MiB limit, sent in
// chunks or with a length, reaches the store byte for byte, and refusals
// read in the stream still come in their order (a file over 20 MiB is
// file_too_large, not a reset or a 413).
func TestUploadStreamsToStore(t *testing.T) {
	ts := newTestServer(t, "")
	for _, chunked := range []bool{false, true} {
		ct, body := cloneForm(synth.MaxClipBytes, "big")
		req, _ := http.NewRequest("POST", ts.base+APIRoot+"/voices/clone", bytes.NewReader(body))
		if chunked {
			req, _ = http.NewRequest("POST", ts.base+APIRoot+"/voices/clone", io.MultiReader(bytes.NewReader(body)))
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("X-API-Key", ts.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 202 {
			t.Fatalf("chunked=%v: %d %s", chunked, resp.StatusCode, b)
		}
		job := string(b[strings.Index(string(b), `"job_id":"`)+10:])
		job = job[:strings.IndexByte(job, '"')]
		claimed, clip, err := ts.store.ClaimJob(t.Context(), "test", time.Minute)
		if err != nil || claimed == nil || claimed.ID != job {
			t.Fatalf("claim: %+v, %v; want job %s", claimed, err, job)
		}
		if len(clip.Data) != synth.MaxClipBytes || !bytes.HasPrefix(clip.Data, []byte("RIFF")) || clip.Filename != "a.wav" {
			t.Fatalf("chunked=%v: stored clip of %d bytes (%q)", chunked, len(clip.Data), clip.Filename)
		}
	}
	ct, body := cloneForm(synth.MaxClipBytes+1, "too big")
	ts.do("POST", "/voices/clone", ts.key, body, "Content-Type", ct).failure(t, 400, control.EFileTooLarge)
}

// Every JSON route gets its whole body, streamed or not, up to MaxJSONBody.
func TestJSONBodyRead(t *testing.T) {
	ts := newTestServer(t, "")
	big := `{"name":"spaced"` + strings.Repeat(" ", 200<<10) + `,"consent":true}`
	for _, chunked := range []bool{false, true} {
		var rd io.Reader = strings.NewReader(big)
		if chunked {
			rd = io.MultiReader(rd)
		}
		req, _ := http.NewRequest("POST", ts.base+APIRoot+"/voices", rd)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", ts.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 || !strings.Contains(string(b), `"name":"spaced"`) {
			t.Fatalf("chunked=%v: %d %s", chunked, resp.StatusCode, b)
		}
	}
}

// Idempotency-Key on clone: the parts are fingerprinted as they stream in,
// so a retry with a new boundary is replayed, and other content is refused.
func TestIdempotentClone(t *testing.T) {
	ts := newTestServer(t, "")
	hdr := func(ct string) []string { return []string{"Content-Type", ct, "Idempotency-Key", "clone-1"} }
	ct1, b1 := cloneForm(4000, "same")
	ct2, b2 := cloneForm(4000, "same")
	if ct1 == ct2 {
		t.Fatal("boundaries should differ")
	}
	first := ts.do("POST", "/voices/clone", ts.key, b1, hdr(ct1)...)
	d1 := first.data(t, 202)
	again := ts.do("POST", "/voices/clone", ts.key, b2, hdr(ct2)...)
	d2 := again.data(t, 202)
	if again.header.Get("Idempotent-Replayed") != "true" || d1["job_id"] != d2["job_id"] {
		t.Fatalf("retry not replayed: %v / %v", d1, d2)
	}
	ct3, b3 := cloneForm(4001, "same")
	ts.do("POST", "/voices/clone", ts.key, b3, hdr(ct3)...).failure(t, 422, control.EIdempotencyKeyReused)
	if n := openUploadFiles(t); n != 0 {
		t.Fatalf("%d upload files still open", n)
	}
}

// A part's headers are bounded far below the multipart reader's own 10 MiB
// (held in memory): a 1 MiB header line is refused as malformed.
func TestUploadPartHeadersBounded(t *testing.T) {
	ts := newTestServer(t, "")
	body := "--x\r\nContent-Disposition: form-data; name=\"consent\"\r\nX-Pad: " + strings.Repeat("a", 1<<20) +
		"\r\n\r\ntrue\r\n--x--\r\n"
	r := ts.do("POST", "/voices/clone", ts.key, body, "Content-Type", "multipart/form-data; boundary=x")
	r.failure(t, 400, control.EInvalidRequest)
	if !strings.Contains(string(r.body), "part headers too large") {
		t.Fatalf("%s", r.body)
	}
}
