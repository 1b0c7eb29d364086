package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"voicesvc/e2e/harness"
)

// sseEvent is one event read off a live stream.
type sseEvent struct {
	name string
	data map[string]any
}

// readSSE reads a live stream's events into ch and closes ch at the end;
// the stream's read error (nil at a clean end) is sent on done.
func readSSE(resp *http.Response, ch chan<- sseEvent, done chan<- error) {
	defer close(ch)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			json.Unmarshal([]byte(line[6:]), &ev.data)
		case line == "":
			ch <- ev
			ev = sseEvent{}
		}
	}
	done <- sc.Err()
}

// SIGTERM drains: new requests get 503 shutting_down (Retry-After 1,
// Connection: close) while a running SSE stream goes on for the grace
// period; at its end the stream gets an error event shutting_down and ends
// cleanly, and the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	const grace = 4 * time.Second
	srv := harness.Start(t, harness.Options{Args: refArgs(1, "--shutdown-grace", grace.String())})
	e := newEnv(t, srv, "pro")
	long := strings.Repeat("This sentence keeps the stream going for a while longer. ", 40)
	stream := synOpen(t, srv.API+"/voices/"+e.voice+"/stream", e.key, map[string]any{"text": long})
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("stream: %d", stream.StatusCode)
	}
	events, readDone := make(chan sseEvent, 1024), make(chan error, 1)
	go readSSE(stream, events, readDone)
	for ev := range events {
		if ev.name == "chunk" {
			break // the stream is running
		}
	}

	var (
		mu     sync.Mutex
		code   int
		exited bool
	)
	termDone := make(chan struct{})
	go func() {
		defer close(termDone)
		c, ok := srv.Terminate(grace + 30*time.Second)
		mu.Lock()
		code, exited = c, ok
		mu.Unlock()
	}()

	// Requests sent after the signal: the first refused one shows the
	// drain's answer. Requests the server took before it saw the signal
	// still succeed.
	var refused *resp
	poll(grace, func() bool {
		r := call("GET", srv.API+"/voices", nil, keyHdr(e.key)...)
		if r != nil && r.status == 503 {
			refused = r
			return true
		}
		return false
	})
	if refused == nil {
		t.Errorf("no request was refused with 503 during the drain")
	} else if refused.code() != "shutting_down" || refused.header.Get("Retry-After") != "1" {
		t.Errorf("during the drain: %s Retry-After=%q, want 503 shutting_down with Retry-After 1",
			refused.outcome(), refused.header.Get("Retry-After"))
	}
	if refused != nil {
		// Go's client hides the Connection header: look at the bytes.
		raw := rawExchange(t, srv.Addr, "GET "+harness.APIPath+"/voices HTTP/1.1\r\nHost: x\r\nX-API-Key: "+e.key+"\r\n\r\n", false)
		hr, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw)), nil)
		if err != nil || hr.StatusCode != 503 || !hr.Close {
			t.Errorf("a request during the drain: %v, want 503 with Connection: close:\n%s", err, raw)
		}
	}

	var chunksAfter int
	var last sseEvent
	for ev := range events {
		if ev.name == "chunk" {
			chunksAfter++
		}
		last = ev
	}
	if err := <-readDone; err != nil {
		t.Errorf("the stream did not end cleanly: %v (last event %q)", err, last.name)
	}
	if last.name != "error" || last.data["code"] != "shutting_down" {
		t.Errorf("the stream's last event: %q (code %v), want error shutting_down", last.name, last.data["code"])
	}
	if chunksAfter == 0 {
		t.Errorf("no audio after the signal: in-flight streams must run on during the grace")
	}
	<-termDone
	mu.Lock()
	defer mu.Unlock()
	if !exited || code != 0 {
		t.Errorf("exit: exited=%v code=%d, want exit 0", exited, code)
	}
}
