package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/codec"
	"voicesvc/control"
)

// ElevenLabs' sockets authenticated by their first message (the vendor's
// "xi_api_key", or "authorization": "Bearer <token>"), over real sockets:
// the host upgrades a handshake without credentials, reads the first
// message, and admits the session then (sessions.FirstMessage).

// readRefusal reads a refused socket's answer: one error message, then a
// close; it returns the message and the close code.
func readRefusal(t *testing.T, c *websocket.Conn) (elMessage, int) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var m elMessage
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("no error message: %v", err)
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Error == "" || m.Message == "" {
		t.Fatalf("error message %s: %v", b, err)
	}
	var raw map[string]any
	json.Unmarshal(b, &raw)
	if raw["fatal"] != true {
		t.Errorf("refusal %s is not fatal", b)
	}
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("after the error: %v, want a close", err)
	}
	return m, ce.Code
}

// sessionsHeld is the workspace's realtime sessions and streams in use,
// once the server has let go of what it will let go of.
func (ss *synthServer) sessionsHeld(t *testing.T, want int) {
	t.Helper()
	if _, ok := waitFor(5*time.Second, func() bool {
		return ss.lim.InUse(ss.ws.ID, control.SlotSession) == want && ss.lim.InUse(ss.ws.ID, control.SlotStream) == want
	}); !ok {
		t.Fatalf("slots held: %d sessions, %d streams, want %d", ss.lim.InUse(ss.ws.ID, control.SlotSession),
			ss.lim.InUse(ss.ws.ID, control.SlotStream), want)
	}
}

// TestElevenLabsFirstMessageKey: the key in the first message works on
// both sockets as in the vendor's documented exchange; characters billed
// are the text's (the opening space, which carries the key, is not).
func TestElevenLabsFirstMessageKey(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	t.Run("stream-input", func(t *testing.T) {
		c, r, err := ss.elDial(ss.voice, "stream-input", "output_format=pcm_16000", nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, r)
		}
		defer c.Close()
		used := ss.used(t)
		text := "The key came in the first message. "
		for _, m := range []map[string]any{
			{"text": " ", "xi_api_key": ss.key, "voice_settings": map[string]any{"stability": 0.5},
				"generation_config": map[string]any{"chunk_length_schedule": []int{50}}},
			{"text": text, "flush": true},
			{"text": ""},
		} {
			if err := c.WriteJSON(m); err != nil {
				t.Fatal(err)
			}
		}
		got, _, _ := readContexts(t, c, []string{""}, false)
		s, err := codec.DecodePCM(codec.S16LE, got[""].audio)
		if err != nil || rms(s) < 0.05 {
			t.Fatalf("%d bytes of audio: %v", len(got[""].audio), err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("after isFinal: %v, want a normal close", err)
		}
		if billed := ss.used(t) - used; billed != int64(len(text)) {
			t.Errorf("billed %d characters, want %d", billed, len(text))
		}
	})
	t.Run("multi-stream-input", func(t *testing.T) {
		c, r, err := ss.elDial(ss.voice, "multi-stream-input", "output_format=pcm_16000&auto_mode=true", nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, r)
		}
		defer c.Close()
		for _, m := range []map[string]any{
			{"text": " ", "context_id": "a", "xi_api_key": ss.key},
			{"text": " ", "context_id": "b"},
			{"text": "First context. ", "context_id": "a", "flush": true},
			{"text": "Second context. ", "context_id": "b", "flush": true},
			{"context_id": "a", "close_context": true},
			{"context_id": "b", "close_context": true},
		} {
			if err := c.WriteJSON(m); err != nil {
				t.Fatal(err)
			}
		}
		got, _, _ := readContexts(t, c, []string{"a", "b"}, false)
		for _, id := range []string{"a", "b"} {
			if len(got[id].audio) == 0 || len(got[id].chars) == 0 {
				t.Fatalf("%s: %d bytes, %d characters", id, len(got[id].audio), len(got[id].chars))
			}
		}
		c.WriteJSON(map[string]any{"close_socket": true})
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
			t.Errorf("close_socket: %v", err)
		}
	})
	t.Run("single-use token as a bearer, fragmented", func(t *testing.T) {
		// A first message in several frames (a small write buffer) after
		// a ping: the host gathers it, the session decodes it again.
		u := "ws" + strings.TrimPrefix(ss.base, "http") + APIRoot + elBase + "/text-to-speech/" + ss.voice + "/stream-input?output_format=pcm_16000"
		d := websocket.Dialer{HandshakeTimeout: 5 * time.Second, WriteBufferSize: 64}
		c, r, err := d.Dial(u, nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, r)
		}
		defer c.Close()
		if err := c.WriteControl(websocket.PingMessage, []byte("hi"), time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		pong := make(chan string, 1)
		c.SetPongHandler(func(s string) error { pong <- s; return nil })
		text := "A token in the first message " + strings.Repeat("works well. ", 10)
		token := ss.wsToken()
		if err := c.WriteJSON(map[string]any{"text": text, "authorization": "Bearer " + token, "flush": true}); err != nil {
			t.Fatal(err)
		}
		c.WriteJSON(map[string]any{"text": ""})
		got, _, _ := readContexts(t, c, []string{""}, false)
		if len(got[""].audio) == 0 {
			t.Fatal("no audio")
		}
		select {
		case p := <-pong:
			if p != "hi" {
				t.Errorf("pong %q", p)
			}
		default:
			t.Error("the ping before the first message was not answered")
		}
		// The token was spent by the admission: single use, as always.
		again, r, err := ss.elDial(ss.voice, "stream-input", "", nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, r)
		}
		defer again.Close()
		again.WriteJSON(map[string]any{"text": " ", "authorization": "Bearer " + token})
		if m, code := readRefusal(t, again); code != 4401 {
			t.Errorf("a spent token: %q (%s), close %d", m.Error, m.Message, code)
		}
	})
	ss.sessionsHeld(t, 0)
	// The handshake's credentials still take the handshake's path.
	c, r, err := ss.elDial(ss.voice, "stream-input", "", xiKey(ss.key))
	if err != nil || r.StatusCode != 101 {
		t.Fatalf("header key: %v (%v)", err, r)
	}
	ss.sessionsHeld(t, 1)
	c.Close()
	ss.sessionsHeld(t, 0)
}

// TestElevenLabsFirstMessageRefused: bad credentials, a missing scope and
// a plan limit are each one error message in the socket's shape, then a
// close (4401 for credentials, 1008 for policy), with nothing admitted or
// billed; an oversized first message is closed 1009.
func TestElevenLabsFirstMessageRefused(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	ss.waitLive()
	noTTS := ss.newKey(ss.ws.ID, []string{control.ScopeVoicesRead}, 0, false)
	for _, tc := range []struct {
		name  string
		first string
		code  string
		close int
	}{
		{"unknown key", `{"text":" ","xi_api_key":"vsk_nope"}`, control.EUnauthorized, 4401},
		{"bad token", `{"text":" ","authorization":"Bearer vst_nope"}`, control.ETokenInvalid, 4401},
		{"no key", `{"text":" "}`, control.EUnauthorized, 4401},
		{"key of a wrong type", `{"text":" ","xi_api_key":5}`, control.EUnauthorized, 4401},
		{"not json", `hello`, control.EUnauthorized, 4401},
		{"scope", `{"text":" ","xi_api_key":"` + noTTS + `"}`, control.EInsufficientScope, websocket.ClosePolicyViolation},
		{"too big", `{"text":"` + strings.Repeat("a", 70<<10) + `"}`, control.EPayloadTooLarge, websocket.CloseMessageTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			used := ss.used(t)
			c, r, err := ss.elDial(ss.voice, "multi-stream-input", "", nil)
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, r)
			}
			defer c.Close()
			if err := c.WriteMessage(websocket.TextMessage, []byte(tc.first)); err != nil {
				t.Fatal(err)
			}
			m, code := readRefusal(t, c)
			if m.Error != tc.code || code != tc.close {
				t.Errorf("refused %q (%s), close %d; want %s, %d", m.Error, m.Message, code, tc.code, tc.close)
			}
			if strings.Contains(m.Message, "vsk_") || strings.Contains(m.Message, "vst_") {
				t.Errorf("the refusal repeats the credential: %s", m.Message)
			}
			ss.sessionsHeld(t, 0)
			if billed := ss.used(t) - used; billed != 0 {
				t.Errorf("billed %d", billed)
			}
		})
	}

	t.Run("too many sessions", func(t *testing.T) {
		// A pro workspace has 4 realtime sessions: 4 held by the header
		// path, the fifth by a first message is refused in the socket's
		// shape, and the 4 stay held.
		for range 4 {
			c, r, err := ss.elDial(ss.voice, "stream-input", "", xiKey(ss.key))
			if err != nil {
				t.Fatalf("dial: %v (%v)", err, r)
			}
			defer c.Close()
		}
		c, r, err := ss.elDial(ss.voice, "stream-input", "", nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, r)
		}
		defer c.Close()
		c.WriteJSON(map[string]any{"text": " ", "xi_api_key": ss.key})
		m, code := readRefusal(t, c)
		if m.Error != control.ETooManySessions || code != websocket.ClosePolicyViolation {
			t.Errorf("refused %q (%s), close %d", m.Error, m.Message, code)
		}
		ss.sessionsHeld(t, 4)
	})
}

// TestElevenLabsFirstMessageNever: a socket that never sends is closed
// once the first-message timeout passes (unauthorized, 4401), holding
// nothing; a plain GET without credentials is still a 401 answer.
func TestElevenLabsFirstMessageNever(t *testing.T) {
	ss := newSynthServer(t, synthOpts{cfg: Config{WSFirstMessageTimeout: 300 * time.Millisecond}})
	c, r, err := ss.elDial(ss.voice, "stream-input", "", nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, r)
	}
	defer c.Close()
	m, code := readRefusal(t, c)
	if m.Error != control.EUnauthorized || code != 4401 {
		t.Errorf("refused %q (%s), close %d", m.Error, m.Message, code)
	}
	ss.sessionsHeld(t, 0)
	c.Close()
	if _, ok := waitFor(5*time.Second, func() bool { return ss.srv.ws.firstPending.Load() == 0 }); !ok {
		t.Errorf("%d sockets still waiting", ss.srv.ws.firstPending.Load())
	}

	req, _ := http.NewRequest("GET", ss.base+APIRoot+elBase+"/text-to-speech/"+ss.voice+"/stream-input", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("a GET without credentials: %d, want 401", resp.StatusCode)
	}
}
