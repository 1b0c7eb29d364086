// Command wstranscript drives one realtime WebSocket session against a
// running voicesvc and prints every frame in order: the source of the
// transcript in docs/realtime.md. Client frames are prefixed "C:", server
// frames "S:", binary frames are shown as <binary N bytes>.
//
//	go run ./scripts/wstranscript --base http://127.0.0.1:8080 --key vsk_... --voice en-us-linda
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
)

const apiRoot = "/voice-svc/api/v1/public"

func main() {
	base := flag.String("base", "http://127.0.0.1:8080", "server base URL")
	key := flag.String("key", os.Getenv("VOICESVC_KEY"), "API key (vsk_...)")
	alias := flag.String("voice", "en-us-linda", "catalog alias of the voice to speak with")
	flag.Parse()
	if err := run(*base, *key, *alias); err != nil {
		fmt.Fprintln(os.Stderr, "wstranscript:", err)
		os.Exit(1)
	}
}

func run(base, key, alias string) error {
	voice, err := voiceID(base, key, alias)
	if err != nil {
		return err
	}
	u, err := url.Parse(base + apiRoot + "/stream")
	if err != nil {
		return err
	}
	u.Scheme = strings.Replace(u.Scheme, "http", "ws", 1)
	d := websocket.Dialer{Subprotocols: []string{"service.v1"}, HandshakeTimeout: 10 * time.Second}
	fmt.Printf("C: GET %s  (X-API-Key: vsk_..., Sec-WebSocket-Protocol: service.v1)\n", u.Path)
	c, resp, err := d.Dial(u.String(), http.Header{"X-API-Key": {key}})
	if err != nil {
		return fmt.Errorf("dial: %v (status %v)", err, status(resp))
	}
	defer c.Close()
	fmt.Printf("S: %s\n", resp.Status)
	for _, h := range []string{"Sec-WebSocket-Protocol", "X-Request-Id", "RateLimit-Policy", "RateLimit", "X-Billing-Remaining"} {
		if v := resp.Header.Get(h); v != "" {
			fmt.Printf("S:   %s: %s\n", h, v)
		}
	}
	s := &session{c: c}
	// One context fed in two pieces, the second finalizing it.
	s.send(`{"type":"task_start","context_id":"greeting","voice_id":"` + voice +
		`","text":"Hello there. How are","output_format":"s16le","sample_rate":16000}`)
	s.send(`{"type":"task_continue","context_id":"greeting","text":" you today?","finalize":true}`)
	s.until("task_done")
	// A message the server does not know: a non-fatal error.
	s.send(`{"type":"task_pause","context_id":"greeting"}`)
	s.until("error")
	// A second context, cancelled once its first audio arrived.
	s.send(`{"type":"task_start","context_id":"story","voice_id":"` + voice +
		`","text":"Once upon a time there was a very long story. It went on and on. Nobody heard the end of it.","finalize":true}`)
	s.until("audio_chunk")
	s.send(`{"type":"task_cancel","context_id":"story"}`)
	s.until("task_cancelled")
	s.send(`{"type":"session_end"}`)
	s.until("")
	return nil
}

type session struct{ c *websocket.Conn }

func (s *session) send(msg string) {
	if !json.Valid([]byte(msg)) {
		panic("not JSON: " + msg)
	}
	fmt.Printf("C: %s\n", msg)
	if err := s.c.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		fmt.Printf("C: write failed: %v\n", err)
	}
}

// until prints server frames until one of type typ arrived ("" = until the
// socket closes). Long runs of audio pairs are kept whole: the transcript
// is shortened by hand, where it says so.
func (s *session) until(typ string) {
	s.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		kind, b, err := s.c.ReadMessage()
		if err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				fmt.Printf("S: <close %d>\n", ce.Code)
			} else {
				fmt.Printf("S: <read ended: %v>\n", err)
			}
			return
		}
		if kind == websocket.BinaryMessage {
			fmt.Printf("S: <binary %d bytes>\n", len(b))
			continue
		}
		fmt.Printf("S: %s\n", b)
		var m struct{ Type string }
		json.Unmarshal(b, &m)
		if typ != "" && m.Type == typ {
			if typ == "audio_chunk" { // its binary frame follows at once
				if _, b, err := s.c.ReadMessage(); err == nil {
					fmt.Printf("S: <binary %d bytes>\n", len(b))
				}
			}
			return
		}
	}
}

// voiceID finds the id of a catalog voice by its alias.
func voiceID(base, key, alias string) (string, error) {
	for page := 1; page < 100; page++ {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s%s/voices?page=%d&page_size=100", base, apiRoot, page), nil)
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

func status(r *http.Response) any {
	if r == nil {
		return "none"
	}
	return r.Status
}
