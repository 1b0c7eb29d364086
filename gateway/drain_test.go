package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// nextEvent reads one SSE event off a live body.
func nextEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			ev.name = line[7:]
		case strings.HasPrefix(line, "data: "):
			json.Unmarshal([]byte(line[6:]), &ev.data)
		case line == "" && ev.name != "":
			return ev, nil
		}
	}
}

// A shutdown drains: new requests are refused with 503 shutting_down
// (Retry-After 1, Connection: close) while running streams go on; when the
// grace ends an SSE stream gets the error event shutting_down and a clean
// end, a raw audio stream an aborted body (never a clean end that would
// pass for the whole audio), and Shutdown returns nil.
func TestShutdownDrains(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: newRef(1)})
	long := strings.Repeat("This sentence keeps the stream going for a while longer. ", 40)
	sse := ss.post("/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": long})
	defer sse.Body.Close()
	raw := ss.post("/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": long, "output_format": "s16le"})
	defer raw.Body.Close()
	if sse.StatusCode != 200 || raw.StatusCode != 200 {
		t.Fatalf("streams: %d %d", sse.StatusCode, raw.StatusCode)
	}
	events := bufio.NewReader(sse.Body)
	for {
		ev, err := nextEvent(events)
		if err != nil {
			t.Fatal(err)
		}
		if ev.name == "chunk" {
			break
		}
	}

	grace, endGrace := context.WithCancel(context.Background())
	shut := make(chan error, 1)
	go func() { shut <- ss.srv.Shutdown(grace) }()
	var refused *response
	if _, ok := waitFor(10*time.Second, func() bool {
		refused = ss.do("GET", "/voices", ss.key, nil)
		return refused.status == 503
	}); !ok {
		t.Fatalf("no 503 once the shutdown started: %d %s", refused.status, refused.body)
	}
	refused.failure(t, 503, "shutting_down")
	if refused.header.Get("Retry-After") != "1" {
		t.Errorf("Retry-After %q", refused.header.Get("Retry-After"))
	}
	// Go's client takes the Connection header out; http.Response.Close
	// says whether it was there.
	req, _ := http.NewRequest("GET", ss.base+APIRoot+"/voices", nil)
	req.Header.Set("X-API-Key", ss.key)
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 503 || !r.Close {
		t.Errorf("a refused request keeps its connection: %v %+v", err, r)
	} else {
		r.Body.Close()
	}
	if r := ss.do("GET", "!/healthz", "", nil); r.status != 200 {
		t.Errorf("healthz during the drain: %d", r.status)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned while streams run and the grace lasts: %v", err)
	default:
	}

	endGrace()
	var last sseEvent
	for {
		ev, err := nextEvent(events)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SSE stream did not end cleanly: %v", err)
		}
		last = ev
	}
	if last.name != "error" || last.data["code"] != "shutting_down" {
		t.Errorf("last event %q %v, want error shutting_down", last.name, last.data["code"])
	}
	if _, err := io.Copy(io.Discard, raw.Body); err == nil {
		t.Errorf("the raw stream cut by the shutdown ended as if whole")
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}
