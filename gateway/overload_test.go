package gateway

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/engine/enginetest"
)

// TestEngineAtCapacity: with the built-in engine (a real pool, graceful
// overload on) behind by more than its MaxLag, every transport refuses new
// work at once, with the engine's answer: the WebSocket handshake before
// the upgrade and HTTP synthesis with 503 upstream_busy and Retry-After, a
// task_start on a session opened earlier with task_failed upstream_busy.
func TestEngineAtCapacity(t *testing.T) {
	o := enginetest.NewOverloaded(t, 20*time.Millisecond)
	pool := o.Pool
	ss := newSynthServer(t, synthOpts{eng: pool})
	// A session opened while the engine had room.
	open, r, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatalf("session before the overload: %v (%s)", err, wsCode(r))
	}
	defer open.Close()

	// Behind: the only worker held, a new request waiting for it.
	o.FallBehind()

	retryAfter := func(h string) bool { n, err := strconv.Atoi(h); return err == nil && n >= 1 }
	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ws handshake", func(t *testing.T) {
			_, r, err := ss.wsDial("", wsKey(ss.key))
			if err == nil || r == nil || r.StatusCode != 503 || wsCode(r) != control.EUpstreamBusy || !retryAfter(r.Header.Get("Retry-After")) {
				t.Fatalf("want 503 upstream_busy with Retry-After, got %v %+v", err, r)
			}
		}},
		{"task_start", func(t *testing.T) {
			if err := open.WriteJSON(map[string]any{"type": "task_start", "context_id": "new", "voice_id": ss.voice,
				"text": "Hello there.", "finalize": true}); err != nil {
				t.Fatal(err)
			}
			open.SetReadDeadline(time.Now().Add(10 * time.Second))
			typ, b, err := open.ReadMessage()
			if err != nil || typ != websocket.TextMessage {
				t.Fatalf("read: %v", err)
			}
			var f map[string]any
			err = json.Unmarshal(b, &f)
			retry, _ := f["retry_after"].(float64) // seconds, as the handshake's Retry-After
			if err != nil || f["type"] != "task_failed" || f["context_id"] != "new" ||
				f["code"] != control.EUpstreamBusy || f["sentences_completed"] != float64(0) || retry < 1 {
				t.Fatalf("first frame %s, want task_failed upstream_busy", b)
			}
		}},
		{"speak", func(t *testing.T) {
			r := ss.do("POST", "/voices/"+ss.voice+"/speak", ss.key, map[string]any{"text": "Hello there."})
			r.failure(t, 503, control.EUpstreamBusy)
			if !retryAfter(r.header.Get("Retry-After")) {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
		}},
		{"stream", func(t *testing.T) {
			r := ss.do("POST", "/voices/"+ss.voice+"/stream", ss.key, map[string]any{"text": "Hello there."})
			r.failure(t, 503, control.EUpstreamBusy)
			if !retryAfter(r.header.Get("Retry-After")) {
				t.Fatalf("Retry-After %q", r.header.Get("Retry-After"))
			}
		}},
		{"compat", func(t *testing.T) {
			resp, b := ss.compatDo(map[string]any{"model": "tts-1", "voice": ss.voice, "input": "Hi.", "response_format": "pcm"},
				bearerHdr(ss.key)...)
			checkCompatError(t, resp, b, 503, "api_error", control.EUpstreamBusy, "")
			if !retryAfter(resp.Header.Get("Retry-After")) {
				t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
	if s := pool.Stats(); s.Refused != uint64(len(tests)) || s.Rejected != 0 {
		t.Errorf("pool refused %d, rejected %d; want %d refused", s.Refused, s.Rejected, len(tests))
	}
}
