package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// Hostile clients: bodies announced but never sent, bodies over the limit,
// more connections than the server has file descriptors.

// vmRSS is the process's resident set now, in bytes.
func vmRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("server gone: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// alive: the server process still runs (the harness reaps it on exit).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// announce opens a connection and sends the headers of a clone upload
// declaring length bytes, then one byte of it.
func announce(t testing.TB, addr, key string, length int) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	hdr := ""
	if key != "" {
		hdr = "X-API-Key: " + key + "\r\n"
	}
	fmt.Fprintf(c, "POST %s/voices/clone HTTP/1.1\r\nHost: x\r\n%sContent-Type: multipart/form-data; boundary=xyz\r\n"+
		"Content-Length: %d\r\n\r\n-", harness.APIPath, hdr, length)
	return c
}

// An announced Content-Length reserves nothing. 100 connections without a
// key and 100 with keys of five workspaces (20 each) each announce a
// 20,000,000-byte upload and send one byte: the keyless ones are answered
// 401 at once, 64 of the others are received (and wait for their bodies:
// the server's cap), the rest answered with Retry-After: 429 past a
// workspace's share (a quarter of the cap) or 503 past the server's cap.
// The server's memory grows by a few MiB, not 100 x 20 MB as when the body
// was buffered by its declared length (3.2 GiB for 100 connections), and
// it goes on answering.
func TestAnnouncedUploadsReserveNothing(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	var keys []string
	for range 5 {
		_, key := harness.Workspace(t, srv.DB, "pro")
		keys = append(keys, key)
	}
	before := vmRSS(t, srv.PID())

	const n = 100
	var conns []net.Conn
	for i := range 2 * n {
		k := ""
		if i >= n {
			k = keys[(i-n)/20]
		}
		c := announce(t, srv.Addr, k, 20_000_000)
		defer c.Close()
		conns = append(conns, c)
	}
	// Read every answer that comes; the uploads being received have none.
	statuses := make([]int, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err == nil {
				statuses[i] = resp.StatusCode
				if (resp.StatusCode == 503 || resp.StatusCode == 429) && resp.Header.Get("Retry-After") == "" {
					statuses[i] = -resp.StatusCode
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	after := vmRSS(t, srv.PID())
	count := map[int]int{}
	for _, s := range statuses[:n] {
		count[s]++
	}
	if count[401] != n {
		t.Errorf("without a key: statuses %v, want %d x 401", count, n)
	}
	count = map[int]int{}
	for _, s := range statuses[n:] {
		count[s]++
	}
	if count[0] != 64 || count[503]+count[429] != n-64 {
		t.Errorf("with keys: statuses %v, want 64 still receiving (0) and %d x 429 or 503 with Retry-After", count, n-64)
	}
	for w := range keys {
		held := 0
		for _, s := range statuses[n+20*w : n+20*(w+1)] {
			if s == 0 {
				held++
			}
		}
		if held > 64/4 {
			t.Errorf("workspace %d holds %d uploads, more than its share of %d", w, held, 64/4)
		}
	}
	t.Logf("RSS %.1f -> %.1f MiB with %d announced uploads held", float64(before)/(1<<20), float64(after)/(1<<20), 2*n)
	if after-before > 100<<20 {
		t.Errorf("RSS grew by %d MiB", (after-before)>>20)
	}
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz while the uploads are held: %v %v", resp, err)
	}
	resp.Body.Close()
}

// A body over 21 MiB is answered 413 and the client reads that answer
// (Go's net/http and Node's http), whether it announced the length or sent
// chunks; it used to see ECONNRESET.
func TestOversizedUploadAnswered(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: []string{"--engine", "reference"}})
	_, key := harness.Workspace(t, srv.DB, "pro")
	const size = 22 << 20
	for _, chunked := range []bool{false, true} {
		const prefix = "--xyz\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n"
		body := io.MultiReader(strings.NewReader(prefix), &clZeros{left: size})
		req, _ := http.NewRequest("POST", srv.API+"/voices/clone", body)
		req.ContentLength = size + int64(len(prefix))
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("X-API-Key", key)
		req.Header.Set("Content-Type", "multipart/form-data; boundary=xyz")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("Go client, chunked=%v: %v", chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || !strings.Contains(string(b), `"code":"payload_too_large"`) {
			t.Errorf("Go client, chunked=%v: %d %s", chunked, resp.StatusCode, b)
		}
	}

	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed")
	}
	// Node's http client writes as fast as the socket takes it and
	// reports the first of 'response' or 'error'.
	const script = `
const http = require('http');
const [url, key, size, chunked] = process.argv.slice(1);
const headers = {'X-API-Key': key, 'Content-Type': 'multipart/form-data; boundary=xyz'};
if (chunked !== 'true') headers['Content-Length'] = Number(size) + 72;
const req = http.request(url, {method: 'POST', headers}, res => {
  let body = '';
  res.on('data', d => body += d);
  res.on('end', () => { console.log(JSON.stringify({status: res.statusCode, body})); process.exit(0); });
});
req.on('error', e => { console.log(JSON.stringify({error: e.code || String(e)})); process.exit(0); });
const chunk = Buffer.alloc(64 << 10);
let left = Number(size);
req.write('--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n');
function write() {
  while (left > 0) {
    const n = Math.min(left, chunk.length);
    left -= n;
    if (!req.write(chunk.subarray(0, n))) { req.once('drain', write); return; }
  }
  req.end();
}
write();
`
	for _, chunked := range []string{"false", "true"} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, node, "-e", script, srv.API+"/voices/clone", key,
			strconv.Itoa(size), chunked).CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), `"status":413`) || !strings.Contains(string(out), "payload_too_large") {
			t.Errorf("node http, chunked=%s: %s %v", chunked, out, err)
		}
	}
}

// Running out of file descriptors does not stop the server. Under a limit
// of 1,024 descriptors, 1,100 idle connections: with the default cap the
// server accepts what it may and leaves the rest in the backlog; with a
// cap over the limit accept fails with EMFILE and is retried. Either way
// the server lives, and once the clients go it answers again. It used to
// exit with status 1 ("Permanent error when accepting new connections").
func TestFileDescriptorExhaustion(t *testing.T) {
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit not installed")
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"default cap", nil},
		{"cap over the limit", []string{"--max-conns", "4096"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := harness.Start(t, harness.Options{
				Args: append([]string{"--engine", "reference", "--engine-workers", "1"}, tc.args...),
				Wrap: []string{"prlimit", "--nofile=1024:1024"},
			})
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for range 1100 {
				c, err := net.DialTimeout("tcp", srv.Addr, 2*time.Second)
				if err != nil {
					continue // the backlog is full: dropped SYNs time out
				}
				conns = append(conns, c)
			}
			// Let the server accept what it can: its descriptors stop
			// growing, or it dies.
			last, stable := -1, 0
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && stable < 5 && alive(srv.PID()); {
				fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", srv.PID()))
				if len(fds) == last {
					stable++
				} else {
					last, stable = len(fds), 0
				}
				time.Sleep(200 * time.Millisecond)
			}
			t.Logf("%d client connections, server holds %d descriptors", len(conns), last)
			if !alive(srv.PID()) {
				t.Fatalf("the server exited:\n%s", srv.Logs())
			}
			if tc.args != nil && !strings.Contains(srv.Logs(), "accept failed, retrying") {
				t.Errorf("no accept failure was logged; the limit was never reached?")
			}
			for _, c := range conns {
				c.Close()
			}
			conns = nil
			client := &http.Client{Timeout: 30 * time.Second}
			resp, err := client.Get(srv.URL + "/healthz")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("after the clients left: %v %v\n%s", resp, err, srv.Logs())
			}
			resp.Body.Close()
			if !alive(srv.PID()) {
				t.Fatal("the server exited")
			}
		})
	}
}
