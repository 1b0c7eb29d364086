package bench

// A fake voicesvc for exercising the clients end to end: net/http, SSE and a
// WebSocket on the interface's paths, answering instantly with 0.1 s of
// silence per request (2400 s16le samples in chunks). Test-only scaffolding;
// the real server is tested by the lead's smoke run.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/fasthttp/websocket"
)

const (
	fakeKey     = "vsk_test"
	fakeVoice   = "aaaaaaaaaaaaaaaaaaaaaaaa"
	fakeLimited = "bbbbbbbbbbbbbbbbbbbbbbbb" // always answers 429 rate_limited
	fakeBadPair = "dddddddddddddddddddddddd" // ws: binary frames shorter than byte_length
	fakeNoDur   = "eeeeeeeeeeeeeeeeeeeeeeee" // ws: no durations, audio from bytes
	fakeBusy    = "ffffffffffffffffffffffff" // at capacity: 503 upstream_busy, ws task_failed upstream_busy
	fakeBusyFor = "fffffffffffffffffffffff3" // at capacity, and the ws task_failed says retry_after 3
	fakeBusyKey = "vsk_busy"                 // a key whose ws handshakes are refused 503 upstream_busy
	fakeChunk   = 1600                       // bytes: 800 samples, 1/30 s
	fakeChunks  = 3                          // 0.1 s per request
)

func newFakeServer(t *testing.T) *httptest.Server {
	t.Helper()
	var cpu atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `{"status":"ok","engine":"fake"}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "process_cpu_seconds_total %d\nprocess_resident_memory_bytes 1.048576e+07\n", cpu.Add(1))
	})
	api := apiPath
	mux.HandleFunc("GET "+api+"/voices", func(w http.ResponseWriter, r *http.Request) {
		if !fakeAuth(w, r) {
			return
		}
		fmt.Fprintf(w, `{"status":200,"error":false,"data":{"voices":[{"id":"cccccccccccccccccccccccc","status":"draft"},{"id":%q,"status":"ready","alias":"fake-voice","name":"Fake"}],"page":1,"page_size":100,"has_more":false}}`, fakeVoice)
	})
	mux.HandleFunc("POST "+api+"/voices/{id}/speak", func(w http.ResponseWriter, r *http.Request) {
		if !fakeAuth(w, r) || !fakeVoiceOK(w, r.PathValue("id")) {
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Sample-Rate", "24000")
		w.Header().Set("X-Audio-Format", "s16le")
		for i := 0; i < fakeChunks; i++ {
			w.Write(make([]byte, fakeChunk))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("POST "+api+"/voices/{id}/stream", func(w http.ResponseWriter, r *http.Request) {
		if !fakeAuth(w, r) || !fakeVoiceOK(w, r.PathValue("id")) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: start\ndata: {\"type\":\"start\",\"sample_rate\":24000,\"audio_format\":\"s16le\"}\n\n")
		b64 := base64.StdEncoding.EncodeToString(make([]byte, fakeChunk))
		for i := 0; i < fakeChunks; i++ {
			fmt.Fprintf(w, "event: chunk\ndata: {\"type\":\"chunk\",\"index\":%d,\"audio_b64\":%q}\n\n", i, b64)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "event: done\ndata: {\"type\":\"done\",\"audio_duration_s\":0.1}\n\n")
	})
	mux.HandleFunc("POST "+api+"/compat/audio/speech", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+fakeKey {
			http.Error(w, `{"error":{"message":"no","type":"auth","code":"invalid_api_key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Voice          string `json:"voice"`
			ResponseFormat string `json:"response_format"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if req.Voice != "fake-voice" {
			http.Error(w, `{"error":{"message":"voice","code":"not_found"}}`, http.StatusNotFound)
			return
		}
		if req.ResponseFormat == "wav" {
			w.Write(wavHeader(24000, 0xffffffff))
		}
		for i := 0; i < fakeChunks; i++ {
			w.Write(make([]byte, fakeChunk))
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("GET "+api+"/stream", func(w http.ResponseWriter, r *http.Request) {
		if !fakeAuth(w, r) {
			return
		}
		if r.Header.Get("X-API-Key") == fakeBusyKey {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"status":503,"error":true,"code":"upstream_busy","message":"the synthesis engine is at capacity"}`)
			return
		}
		up := websocket.Upgrader{}
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		fakeSession(c)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func fakeAuth(w http.ResponseWriter, r *http.Request) bool {
	if k := r.Header.Get("X-API-Key"); k != fakeKey && k != fakeBusyKey {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"status":401,"error":true,"message":"invalid key"}`)
		return false
	}
	return true
}

func fakeVoiceOK(w http.ResponseWriter, id string) bool {
	if id == fakeLimited {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"status":429,"error":true,"code":"rate_limited","message":"slow down"}`)
		return false
	}
	if id == fakeBusy {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"status":503,"error":true,"code":"upstream_busy","message":"the synthesis engine is at capacity"}`)
		return false
	}
	return true
}

// fakeSession answers each context once it is finalized; one goroutine, so
// frames of different contexts never interleave inside a pair.
func fakeSession(c *websocket.Conn) {
	voices := map[string]string{} // context -> voice
	for {
		var m struct {
			Type      string `json:"type"`
			ContextID string `json:"context_id"`
			Finalize  bool   `json:"finalize"`
			VoiceID   string `json:"voice_id"`
		}
		_, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		json.Unmarshal(data, &m)
		switch {
		case m.Type == "session_end":
			c.WriteJSON(map[string]any{"type": "session_ended", "reason": "client_request"})
			return
		case m.Type == "task_start" && m.VoiceID == fakeBusy:
			c.WriteJSON(map[string]any{"type": "task_failed", "context_id": m.ContextID, "sentences_completed": 0,
				"code": "upstream_busy", "trace_id": "t"})
			continue
		case m.Type == "task_start" && m.VoiceID == fakeBusyFor:
			c.WriteJSON(map[string]any{"type": "task_failed", "context_id": m.ContextID, "sentences_completed": 0,
				"code": "upstream_busy", "retry_after": 3, "trace_id": "t"})
			continue
		case m.Type == "task_start" && m.VoiceID != fakeVoice && m.VoiceID != fakeBadPair && m.VoiceID != fakeNoDur:
			c.WriteJSON(map[string]any{"type": "error", "context_id": m.ContextID, "code": "voice_not_found", "fatal": false})
			continue
		case m.Type == "task_start":
			voices[m.ContextID] = m.VoiceID
			c.WriteJSON(map[string]any{"type": "task_started", "context_id": m.ContextID, "sample_rate": 24000, "audio_format": "s16le"})
		}
		if !m.Finalize {
			continue
		}
		voice := voices[m.ContextID]
		dur, total := 1.0/30, 0.1
		if voice == fakeNoDur {
			dur, total = 0, 0
		}
		for i := 0; i < fakeChunks; i++ {
			c.WriteJSON(map[string]any{"type": "audio_chunk", "context_id": m.ContextID, "sentence_index": 0,
				"chunk_index": i, "audio_duration_s": dur, "byte_length": fakeChunk})
			n := fakeChunk
			if voice == fakeBadPair {
				n--
			}
			c.WriteMessage(websocket.BinaryMessage, make([]byte, n))
		}
		c.WriteJSON(map[string]any{"type": "sentence_done", "context_id": m.ContextID, "sentence_index": 0})
		c.WriteJSON(map[string]any{"type": "task_done", "context_id": m.ContextID, "num_sentences": 1, "total_audio_duration_s": total})
	}
}
