package gateway

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/engine"
)

// wsDial opens APIRoot/stream with query q (may be "") and headers.
func (ss *synthServer) wsDial(q string, h http.Header) (*websocket.Conn, *http.Response, error) {
	u := "ws" + strings.TrimPrefix(ss.base, "http") + APIRoot + "/stream"
	if q != "" {
		u += "?" + q
	}
	d := websocket.Dialer{HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(u, h)
	if resp != nil && resp.Body != nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	return c, resp, err
}

func wsKey(k string) http.Header { return http.Header{"X-Api-Key": {k}} }

// wsCode is the code (or the flat body's error) of a refused handshake.
func wsCode(r *http.Response) string {
	if r == nil {
		return ""
	}
	var m map[string]any
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &m)
	if c, ok := m["code"].(string); ok {
		return c
	}
	c, _ := m["error"].(string)
	return c
}

func (ss *synthServer) wsToken() string {
	ss.t.Helper()
	return ss.do("POST", "/tokens", ss.key, map[string]any{}).data(ss.t, 201)["token"].(string)
}

// speakOnce runs one context to task_done on c.
func speakOnce(t *testing.T, c *websocket.Conn, voice, id string) {
	t.Helper()
	if err := c.WriteJSON(map[string]any{"type": "task_start", "context_id": id, "voice_id": voice,
		"text": "Hello there.", "finalize": true}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ == websocket.TextMessage && strings.Contains(string(b), `"task_done"`) {
			return
		}
		if typ == websocket.TextMessage && strings.Contains(string(b), `"error"`) {
			t.Fatalf("error frame: %s", b)
		}
	}
}

func TestWSHandshake(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})

	// (a) X-API-Key: headers of a synthesis response on the 101.
	c, r, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, wsCode(r))
	}
	for _, h := range []string{"X-Request-Id", "X-Billing-Remaining", "RateLimit", "RateLimit-Policy"} {
		if r.Header.Get(h) == "" {
			t.Errorf("101 lacks %s: %v", h, r.Header)
		}
	}
	speakOnce(t, c, ss.voice, "a")
	c.Close()

	// (b) subprotocol token: service.v1 selected, token spent.
	tok := ss.wsToken()
	c, r, err = ss.wsDial("", http.Header{"Sec-Websocket-Protocol": {"service.v1, " + tok}})
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, wsCode(r))
	}
	if c.Subprotocol() != "service.v1" {
		t.Errorf("subprotocol %q", c.Subprotocol())
	}
	speakOnce(t, c, ss.voice, "b")
	c.Close()
	if _, r, _ = ss.wsDial("", http.Header{"Sec-Websocket-Protocol": {"service.v1, " + tok}}); r == nil ||
		r.StatusCode != 401 || wsCode(r) != "token_invalid" {
		t.Errorf("reused token: %v", r)
	}

	// (c) access_token; (d) api_key with Deprecation.
	c, r, err = ss.wsDial("access_token="+ss.wsToken(), nil)
	if err != nil {
		t.Fatalf("access_token: %v (%s)", err, wsCode(r))
	}
	c.Close()
	c, r, err = ss.wsDial("api_key="+ss.key, nil)
	if err != nil || r.Header.Get("Deprecation") == "" {
		t.Fatalf("api_key: %v %v", err, r.Header)
	}
	c.Close()
	if _, r, _ = ss.wsDial("api_key=vsk_nope", nil); r == nil || r.StatusCode != 401 || r.Header.Get("Deprecation") == "" {
		t.Errorf("bad api_key: %v", r)
	}

	// Refusals before the upgrade.
	if _, r, _ = ss.wsDial("", nil); r == nil || r.StatusCode != 401 {
		t.Errorf("no credentials: %v", r)
	}
	if _, r, _ = ss.wsDial("access_token=vst_bad", nil); r == nil || r.StatusCode != 401 || wsCode(r) != "token_invalid" {
		t.Errorf("bad token: %v", r)
	}
	plain := ss.do("GET", "/stream", ss.key, nil)
	plain.failure(t, 400, control.EInvalidRequest)
}

// readyEngine reports itself unavailable.
type readyEngine struct{ engine.Engine }

func (readyEngine) Ready() error { return engine.ErrUnavailable }

func TestWSEngineUnavailable(t *testing.T) {
	ss := newSynthServer(t, synthOpts{eng: readyEngine{newRef(0)}})
	_, r, err := ss.wsDial("", wsKey(ss.key))
	if err == nil || r == nil || r.StatusCode != 503 || wsCode(r) != "upstream_busy" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("want 503 upstream_busy with Retry-After, got %v %v", err, r)
	}
}

func TestWSSessionSlots(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	var conns []*websocket.Conn
	for i := 0; i < 4; i++ {
		c, r, err := ss.wsDial("", wsKey(ss.key))
		if err != nil {
			t.Fatalf("session %d: %v (%s)", i, err, wsCode(r))
		}
		conns = append(conns, c)
	}
	_, r, err := ss.wsDial("", wsKey(ss.key))
	if err == nil || r.StatusCode != 429 || wsCode(r) != "too_many_sessions" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("5th session: %v %v", err, r)
	}
	// Closing one frees its session and stream slots.
	conns[0].WriteJSON(map[string]any{"type": "session_end"})
	for {
		if _, _, err := conns[0].ReadMessage(); err != nil {
			break
		}
	}
	conns[0].Close()
	if _, ok := waitFor(5*time.Second, func() bool {
		c, _, err := ss.wsDial("", wsKey(ss.key))
		if err == nil {
			conns[0] = c
		}
		return err == nil
	}); !ok {
		t.Fatal("slot not released")
	}

	// Shutdown ends idle sessions at once: the fatal shutting_down, 1001.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	go ss.srv.Shutdown(ctx)
	conns[1].SetReadDeadline(time.Now().Add(5 * time.Second))
	var ev struct {
		Type, Code string
		Fatal      bool
	}
	if err := conns[1].ReadJSON(&ev); err != nil || ev.Type != "error" || ev.Code != "shutting_down" || !ev.Fatal {
		t.Fatalf("at shutdown: %+v %v", ev, err)
	}
	_, _, err = conns[1].ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("at shutdown: %v", err)
	}
}

// TestWSOutlivesHTTPTimeouts: fasthttp's read, write and idle timeouts do
// not reach a hijacked socket; only the session's own idle timeout does.
func TestWSOutlivesHTTPTimeouts(t *testing.T) {
	short := 150 * time.Millisecond
	ss := newSynthServer(t, synthOpts{cfg: Config{ReadTimeout: short, WriteTimeout: short,
		StreamWriteTimeout: short, IdleTimeout: short, WSIdleTimeout: 5 * short}})
	c, r, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatalf("dial: %v (%s)", err, wsCode(r))
	}
	defer c.Close()
	time.Sleep(3 * short)
	speakOnce(t, c, ss.voice, "late") // 3x every fasthttp timeout later
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage() // then silence: session_ended idle
	if err != nil || !strings.Contains(string(b), `"idle"`) {
		t.Fatalf("idle: %q %v", b, err)
	}
}

// TestWSFramesBehindHandshake: a client that sends its first frames right
// behind the handshake, before the 101, has them read (fasthttp has them
// in its buffer when the connection is hijacked), and the server closes
// the socket once the session ends.
func TestWSFramesBehindHandshake(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	addr := strings.TrimPrefix(ss.base, "http://")
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Longer than one read of what is buffered, and two frames.
	start := `{"type":"task_start","context_id":"early","voice_id":"` + ss.voice + `","text":"` +
		strings.Repeat("Hello there ", 200) + `"}`
	b := []byte("GET " + APIRoot + "/stream HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\n" +
		"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"X-API-Key: " + ss.key + "\r\n\r\n")
	b = appendClientFrame(b, start)
	b = appendClientFrame(b, `{"type":"session_end"}`)
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 101 ") {
		t.Fatalf("status %q %v", status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == "\r\n" {
			break
		}
	}
	var texts []string
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			t.Fatalf("frames %q: %v", texts, err)
		}
		n := int(h[1] & 0x7f)
		switch n {
		case 126:
			var x [2]byte
			io.ReadFull(br, x[:])
			n = int(x[0])<<8 | int(x[1])
		case 127:
			var x [8]byte
			io.ReadFull(br, x[:])
			n = int(binary.BigEndian.Uint64(x[:]))
		}
		p := make([]byte, n)
		if _, err := io.ReadFull(br, p); err != nil {
			t.Fatal(err)
		}
		if h[0]&0x0f == websocket.TextMessage {
			texts = append(texts, string(p))
		}
		if h[0]&0x0f == websocket.CloseMessage {
			break
		}
	}
	if len(texts) == 0 || !strings.Contains(texts[0], `"task_started"`) ||
		!strings.Contains(texts[len(texts)-1], `"session_ended"`) {
		t.Fatalf("frames: %q", texts)
	}
	// Answer the close; then the server closes the socket.
	c.Write(appendClientClose(nil))
	if _, err := io.Copy(io.Discard, br); err != nil {
		t.Fatalf("socket not closed: %v", err)
	}
}

// appendClientFrame appends a masked (zero key) final text frame.
func appendClientFrame(b []byte, msg string) []byte {
	switch n := len(msg); {
	case n <= 125:
		b = append(b, 0x81, 0x80|byte(n))
	default:
		b = append(b, 0x81, 0x80|126, byte(n>>8), byte(n))
	}
	b = append(b, 0, 0, 0, 0)
	return append(b, msg...)
}

// appendClientClose appends a masked close frame with code 1000.
func appendClientClose(b []byte) []byte {
	return append(b, 0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8)
}
