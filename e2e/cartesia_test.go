package e2e

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/e2e/harness"
)

// The Cartesia dialect's workspace rules (issue 29, docs/dialects.md#cartesia),
// against the real binary: a socket holds one concurrency slot; billed =
// characters synthesized, whole when nothing is cancelled and less the
// unstarted text when a context is cancelled; a revoked key closes the
// socket; the metrics count the dialect; the socket takes a browser's
// access_token. The official clients' fidelity is e2e/cartesia.

const cartesiaBase = "/compat/cartesia"

// cartesiaWS is a Cartesia socket as a test drives it.
type cartesiaWS struct {
	t  testing.TB
	ws *websocket.Conn
}

// cartesiaDial opens /tts/websocket under the base (or, root, at the host
// root) with query q and headers h; it returns the socket or the refused
// handshake's status and body.
func cartesiaDial(t testing.TB, srv *harness.Server, root bool, q url.Values, h http.Header) (*cartesiaWS, int, []byte) {
	t.Helper()
	u := "ws://" + srv.Addr + harness.APIPath + cartesiaBase + "/tts/websocket"
	if root {
		u = "ws://" + srv.Addr + "/tts/websocket"
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	c, r, err := wsDialer.Dial(u, h)
	if err != nil {
		status, body := 0, []byte(err.Error())
		if r != nil {
			status = r.StatusCode
			body = make([]byte, 4096)
			n, _ := r.Body.Read(body)
			body = body[:n]
			r.Body.Close()
		}
		return nil, status, body
	}
	t.Cleanup(func() { c.Close() })
	return &cartesiaWS{t: t, ws: c}, 101, nil
}

func (c *cartesiaWS) send(m map[string]any) {
	c.t.Helper()
	if err := c.ws.WriteJSON(m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

// generate sends a generation message for context id.
func (c *cartesiaWS) generate(id, voice, text string, cont bool, extra ...any) {
	m := map[string]any{"context_id": id, "model_id": "sonic-3", "transcript": text, "continue": cont,
		"voice": map[string]any{"mode": "id", "id": voice}, "language": "en",
		"output_format": map[string]any{"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000}}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	c.send(m)
}

// cartesiaEvent is a server message (or the close, Type "close").
type cartesiaEvent struct {
	Type       string `json:"type"`
	ContextID  string `json:"context_id"`
	Data       string `json:"data"`
	Done       bool   `json:"done"`
	StatusCode int    `json:"status_code"`
	ErrorCode  string `json:"error_code"`
	FlushID    int    `json:"flush_id"`
	CloseCode  int    `json:"-"`
}

func (c *cartesiaWS) next(limit time.Duration) cartesiaEvent {
	c.t.Helper()
	c.ws.SetReadDeadline(time.Now().Add(limit))
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		if ce, ok := err.(*websocket.CloseError); ok {
			return cartesiaEvent{Type: "close", CloseCode: ce.Code}
		}
		c.t.Fatalf("read: %v", err)
	}
	var ev cartesiaEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		c.t.Fatalf("not JSON: %.200s", b)
	}
	return ev
}

// until reads events until stop holds for one, which it returns last.
func (c *cartesiaWS) until(stop func(cartesiaEvent) bool) []cartesiaEvent {
	c.t.Helper()
	var evs []cartesiaEvent
	for {
		ev := c.next(30 * time.Second)
		evs = append(evs, ev)
		if stop(ev) {
			return evs
		}
		if ev.Type == "close" {
			c.t.Fatalf("closed early: %v", evs)
		}
	}
}

func cartesiaIs(typ, ctx string) func(cartesiaEvent) bool {
	return func(ev cartesiaEvent) bool { return ev.Type == typ && (ctx == "" || ev.ContextID == ctx) }
}

func cartesiaBytes(t testing.TB, srv *harness.Server, key, voice, text string) *resp {
	t.Helper()
	body := map[string]any{"model_id": "sonic-3", "transcript": text, "voice": voice,
		"output_format": map[string]any{"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000}}
	return mustCall(t, "POST", srv.API+cartesiaBase+"/tts/bytes", body, keyHdr(key)...)
}

// cartesiaCode is error_code of Cartesia's error object (null: "").
func cartesiaCode(t testing.TB, body []byte) string {
	t.Helper()
	var m struct {
		ErrorCode *string `json:"error_code"`
		Title     string  `json:"title"`
		Message   string  `json:"message"`
		RequestID string  `json:"request_id"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Title == "" || m.Message == "" || m.RequestID == "" {
		t.Fatalf("not Cartesia's error object: %.300s", body)
	}
	if m.ErrorCode == nil {
		return ""
	}
	return *m.ErrorCode
}

// TestCartesiaSocketSlot: an open socket holds the workspace's one
// concurrency slot, whatever it does; a request meanwhile is 429
// concurrency_limited in Cartesia's shape with Retry-After, and the slot
// comes back when the socket closes.
func TestCartesiaSocketSlot(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", nil, "--concurrency", "1")
	c, status, body := cartesiaDial(t, srv, false, nil, http.Header{"Authorization": {"Bearer " + e.key}})
	if c == nil {
		t.Fatalf("handshake %d %s", status, body)
	}
	r := cartesiaBytes(t, srv, e.key, e.voice, "Hello.")
	if r.status != 429 || cartesiaCode(t, r.body) != "concurrency_limited" || r.header.Get("Retry-After") == "" {
		t.Fatalf("with the socket open: %d %s (Retry-After %q)", r.status, r.body, r.header.Get("Retry-After"))
	}
	if _, status, body := cartesiaDial(t, srv, true, nil, http.Header{"X-Api-Key": {e.key}}); status != 429 ||
		cartesiaCode(t, body) != "concurrency_limited" {
		t.Fatalf("a second socket: %d %s", status, body)
	}
	c.ws.Close()
	if !poll(5*time.Second, func() bool { return cartesiaBytes(t, srv, e.key, e.voice, "Hello.").status == 200 }) {
		t.Fatal("the slot did not come back when the socket closed")
	}
}

// TestCartesiaBilling: billed = characters synthesized. Contexts spoken to
// the end bill their whole text, sent in pieces; a context cancelled while
// its first sentence plays bills the sentences whose synthesis started,
// and nothing of it arrives a second after the cancel.
func TestCartesiaBilling(t *testing.T) {
	srv, e := wsServer(t, 1, "pro", []string{"--billing", "enforce"}, "--allowance", "100000")
	c, status, body := cartesiaDial(t, srv, false, nil, http.Header{"X-Api-Key": {e.key}})
	if c == nil {
		t.Fatalf("handshake %d %s", status, body)
	}
	pieces := []string{"Hello from ", "a context in ", "three pieces."}
	for i, p := range pieces {
		c.generate("whole", e.voice, p, true, "max_buffer_delay_ms", 0)
		if i == 1 {
			c.send(map[string]any{"context_id": "whole", "transcript": "", "continue": true, "flush": true,
				"voice": e.voice, "output_format": map[string]any{"container": "raw", "encoding": "pcm_s16le", "sample_rate": 16000}})
		}
	}
	c.generate("whole", e.voice, "", false)
	evs := c.until(cartesiaIs("done", "whole"))
	flushed := false
	for _, ev := range evs {
		flushed = flushed || ev.Type == "flush_done" && ev.FlushID == 1
	}
	if !flushed {
		t.Fatalf("no flush_done 1: %v", evs)
	}
	whole := int64(len(strings.Join(pieces, "")))
	if !poll(5*time.Second, func() bool { return usedOf(t, e.db, e.ws) == whole }) {
		t.Fatalf("used %d characters, want %d", usedOf(t, e.db, e.ws), whole)
	}

	const sentence = "This sentence keeps the paced engine busy for a while. "
	c.generate("cut", e.voice, strings.Repeat(sentence, 10), false)
	c.until(cartesiaIs("chunk", "cut"))
	c.send(map[string]any{"context_id": "cut", "cancel": true})
	cancelled := time.Now()
	// Nothing of the context a second after the cancel: a marker context
	// opened then ends, and no chunk of "cut" arrives after it.
	time.Sleep(time.Second)
	c.generate("marker", e.voice, "Done.", false)
	for _, ev := range c.until(cartesiaIs("done", "marker")) {
		if ev.ContextID == "cut" && time.Since(cancelled) > time.Second {
			t.Fatalf("%s of the cancelled context after a second", ev.Type)
		}
	}
	// What of "cut" is billed is text whose synthesis started: some of it,
	// at most its first two sentences (the next may have started), never
	// the ten.
	var cut int64
	if !poll(5*time.Second, func() bool {
		cut = usedOf(t, e.db, e.ws) - whole - int64(len("Done."))
		return cut > 0 && cut <= int64(2*len(sentence)) // (usage is settled at each lease sync)
	}) {
		t.Fatalf("the cancelled context billed %d characters, want 1 to %d", cut, 2*len(sentence))
	}
	t.Logf("the cancelled context billed %d of its %d characters", cut, 10*len(sentence))
}

// TestCartesiaRevocation: a key revoked while its socket streams closes
// the socket with a fatal unauthorized error event, within the change
// feed's delay (the rule is 2 s; the bound is loose for a shared machine).
func TestCartesiaRevocation(t *testing.T) {
	srv, e := wsServer(t, 1, "pro", nil)
	k := harness.Admin(t, srv.DB, "key", "create", "--workspace", e.ws)
	c, status, body := cartesiaDial(t, srv, false, url.Values{"api_key": {k["key"].(string)}}, nil)
	if c == nil {
		t.Fatalf("handshake %d %s", status, body)
	}
	c.generate("a", e.voice, strings.Repeat("This sentence keeps the engine busy. ", 20), false)
	c.until(cartesiaIs("chunk", "a"))
	harness.Admin(t, srv.DB, "key", "revoke", "--id", k["id"].(string))
	revoked := time.Now()
	evs := c.until(cartesiaIs("close", ""))
	took := time.Since(revoked)
	n := len(evs)
	if n < 2 || evs[n-2].Type != "error" || evs[n-2].ErrorCode != "unauthorized" || evs[n-2].StatusCode != 401 || !evs[n-2].Done {
		t.Fatalf("want the unauthorized error event, then the close: %v", evs[max(0, n-3):])
	}
	t.Logf("socket closed %v after the revocation", took)
	if took > 5*time.Second {
		t.Errorf("socket closed %v after the revocation", took)
	}
}

// TestCartesiaCredentialsAndMetrics: the socket takes an access token in
// the query (a browser's only way), a bad key is 401 in Cartesia's shape
// at the handshake, unknown paths under the base and under /tts/ are
// Cartesia's 404, and the synthesis series count the dialect.
func TestCartesiaCredentialsAndMetrics(t *testing.T) {
	srv, e := wsServer(t, 0, "pro", nil)
	if _, status, body := cartesiaDial(t, srv, false, url.Values{"api_key": {"vsk_nope"}}, nil); status != 401 ||
		cartesiaCode(t, body) != "" {
		t.Fatalf("a bad key: %d %s", status, body)
	}
	for _, u := range []string{srv.URL + "/tts/nope", srv.API + cartesiaBase + "/nope"} {
		if r := mustCall(t, "GET", u, nil, keyHdr(e.key)...); r.status != 404 || cartesiaCode(t, r.body) != "not_found" {
			t.Fatalf("GET %s: %d %s", u, r.status, r.body)
		}
	}
	tok := e.token(t, srv, map[string]any{})
	c, status, body := cartesiaDial(t, srv, true, url.Values{"access_token": {tok}}, nil)
	if c == nil {
		t.Fatalf("access_token handshake %d %s", status, body)
	}
	c.generate("t", e.voice, "Spoken with a token.", false, "add_timestamps", true)
	c.until(cartesiaIs("done", "t"))
	if r := cartesiaBytes(t, srv, e.key, e.voice, "Bytes."); r.status != 200 {
		t.Fatalf("bytes: %d %s", r.status, r.body)
	}
	r := mustCall(t, "GET", srv.URL+"/metrics", nil)
	for _, transport := range []string{"websocket", "speak"} {
		re := regexp.MustCompile(`voicesvc_synth_total\{[^}]*dialect="cartesia"[^}]*outcome="ok"[^}]*transport="` + transport + `"[^}]*\} (\d+)`)
		m := re.FindSubmatch(r.body)
		if m == nil {
			t.Fatalf("no ok series of dialect cartesia, transport %s", transport)
		}
		if n, _ := strconv.Atoi(string(m[1])); n < 1 {
			t.Fatalf("transport %s counted %d", transport, n)
		}
	}
}
