// Package wstranscript records one realtime WebSocket session against a
// running voicesvc and prints every frame in order: the transcript in
// docs/realtime.md#transcript. The command scripts/wstranscript runs it
// against any server; e2e.TestRealtimeTranscript runs it against the real
// binary and checks that realtime.md shows what it printed.
//
// The session is made so that its frames do not depend on timing: each
// context is read to an event after which the server has nothing left to
// send for it, before the next client message.
package wstranscript

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
)

// APIRoot is the API root below the base URL.
const APIRoot = "/voice-svc/api/v1/public"

// Record drives the session with key against base (http://host:port),
// speaking with voiceID, and writes the transcript to w: client frames
// prefixed "C:", server frames "S:", binary frames as <binary N bytes>.
func Record(w io.Writer, base, key, voiceID string) error {
	u, err := url.Parse(base + APIRoot + "/stream")
	if err != nil {
		return err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	d := websocket.Dialer{Subprotocols: []string{"service.v1"}, HandshakeTimeout: 10 * time.Second}
	fmt.Fprintf(w, "C: GET %s\nC:   X-API-Key: vsk_...\nC:   Sec-WebSocket-Protocol: service.v1\n", u.Path)
	c, resp, err := d.Dial(u.String(), http.Header{"X-API-Key": {key}})
	if err != nil {
		st := "none"
		if resp != nil {
			st = resp.Status
		}
		return fmt.Errorf("dial: %v (status %s)", err, st)
	}
	defer c.Close()
	fmt.Fprintf(w, "S: %s\n", resp.Status)
	for _, h := range []string{"Sec-WebSocket-Protocol", "X-Request-Id", "RateLimit-Policy", "RateLimit", "X-Billing-Remaining"} {
		if v := resp.Header.Get(h); v != "" {
			fmt.Fprintf(w, "S:   %s: %s\n", h, v)
		}
	}
	s := &session{w: w, c: c}
	// One context fed in two pieces, the second finalizing it, with word
	// timestamps.
	s.send(`{"type":"task_start","context_id":"greeting","voice_id":"` + voiceID +
		`","text":"Hello there. How are","output_format":"s16le","sample_rate":16000,"timestamps":true}`)
	s.send(`{"type":"task_continue","context_id":"greeting","text":" you today?","finalize":true}`)
	s.until("task_done")
	// A message the server does not know: a non-fatal error.
	s.send(`{"type":"task_pause","context_id":"greeting"}`)
	s.until("error")
	// A second context whose first sentence is complete and whose second
	// waits for more text (idle_flush_ms keeps it waiting); it is cancelled
	// once the first sentence is done, so the receipt is the same each run.
	s.send(`{"type":"task_start","context_id":"story","voice_id":"` + voiceID +
		`","text":"Once upon a time there was a story. It went on and","idle_flush_ms":5000}`)
	s.until("sentence_done")
	s.send(`{"type":"task_cancel","context_id":"story"}`)
	s.until("task_cancelled")
	s.send(`{"type":"session_end"}`)
	s.until("")
	return s.err
}

type session struct {
	w   io.Writer
	c   *websocket.Conn
	err error
}

func (s *session) send(msg string) {
	if !json.Valid([]byte(msg)) {
		panic("not JSON: " + msg)
	}
	fmt.Fprintf(s.w, "C: %s\n", msg)
	if err := s.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil && s.err == nil {
		s.err = fmt.Errorf("write: %v", err)
	}
}

// until prints server frames until one of type typ arrived ("" = until the
// socket closes).
func (s *session) until(typ string) {
	s.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		kind, b, err := s.c.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				fmt.Fprintf(s.w, "S: <close %d>\n", ce.Code)
				if typ != "" && s.err == nil {
					s.err = fmt.Errorf("closed while waiting for %s", typ)
				}
			} else {
				fmt.Fprintf(s.w, "S: <read ended: %v>\n", err)
				if s.err == nil {
					s.err = err
				}
			}
			return
		}
		if kind == websocket.BinaryMessage {
			fmt.Fprintf(s.w, "S: <binary %d bytes>\n", len(b))
			continue
		}
		fmt.Fprintf(s.w, "S: %s\n", b)
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if typ != "" && m.Type == typ {
			return
		}
	}
}

// VoiceID finds the id of a catalog voice by its alias.
func VoiceID(base, key, alias string) (string, error) {
	for page := 1; page < 100; page++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s%s/voices?page=%d&page_size=100", base, APIRoot, page), nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		var body struct {
			Data struct {
				Voices []struct {
					ID, Alias string
				}
				HasMore bool `json:"has_more"`
			}
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		for _, v := range body.Data.Voices {
			if v.Alias == alias {
				return v.ID, nil
			}
		}
		if !body.Data.HasMore {
			break
		}
	}
	return "", fmt.Errorf("no voice with alias %q", alias)
}
