package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/e2e/harness"
)

// The Deepgram dialect under the workspace's rules (issue 31): its speak
// requests and sockets share the workspace's slots, billing, plan limits
// and revocation with every other transport, and answer refusals in
// Deepgram's error shape. The official clients' tests are in
// e2e/deepgram/deepgram.test.mjs.

func dgBase(srv *harness.Server) string { return srv.API + "/compat/deepgram/v1/speak" }

// dgSpeak posts text to the REST speak with `Authorization: Token key`.
func dgSpeak(t testing.TB, srv *harness.Server, key, query, text string) *resp {
	t.Helper()
	return mustCall(t, "POST", dgBase(srv)+"?"+query, map[string]string{"text": text}, "Authorization", "Token "+key)
}

// dgError is Deepgram's error body.
type dgError struct {
	Category, Message, Code string
	RequestID               string `json:"request_id"`
}

// dgRefused asserts r is a refusal of status and code in Deepgram's shape.
func dgRefused(t testing.TB, r *resp, status int, category, code string) {
	t.Helper()
	var e dgError
	if err := json.Unmarshal(r.body, &e); err != nil || r.status != status || e.Category != category ||
		e.Code != code || e.Message == "" || !strings.HasPrefix(e.RequestID, "req_") {
		t.Fatalf("want %d %s %s in Deepgram's shape, got %d %s", status, category, code, r.status, r.body)
	}
}

// dgSocket is a speak socket: its text messages and the audio bytes
// before each.
type dgSocket struct {
	t  testing.TB
	ws *websocket.Conn
}

type dgMsg struct {
	Type        string `json:"type"`
	SequenceID  int    `json:"sequence_id"`
	Code        string `json:"code"`
	Description string `json:"description"`
	AudioBefore int    `json:"-"`
	CloseCode   int    `json:"-"`
}

// dgDial opens the socket, or returns the refused handshake.
func dgDial(t testing.TB, srv *harness.Server, key, query string) (*dgSocket, *resp) {
	t.Helper()
	u := "ws://" + srv.Addr + harness.APIPath + "/compat/deepgram/v1/speak?" + query
	c, r, err := wsDialer.Dial(u, http.Header{"Authorization": {"Token " + key}})
	if err != nil {
		if r == nil {
			t.Fatalf("dial: %v", err)
		}
		body, _ := io.ReadAll(r.Body)
		return nil, &resp{status: r.StatusCode, header: r.Header, body: body}
	}
	t.Cleanup(func() { c.Close() })
	return &dgSocket{t: t, ws: c}, nil
}

func (s *dgSocket) send(typ, text string) {
	s.t.Helper()
	m := map[string]string{"type": typ}
	if typ == "Speak" {
		m["text"] = text
	}
	if err := s.ws.WriteJSON(m); err != nil {
		s.t.Fatal(err)
	}
}

// until reads messages until stop holds for one (a close is Type "close").
func (s *dgSocket) until(stop func(dgMsg) bool) []dgMsg {
	s.t.Helper()
	var out []dgMsg
	audio := 0
	s.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		kind, b, err := s.ws.ReadMessage()
		var m dgMsg
		switch {
		case err != nil:
			ce, ok := err.(*websocket.CloseError)
			if !ok {
				s.t.Fatalf("read: %v after %v", err, out)
			}
			m = dgMsg{Type: "close", CloseCode: ce.Code}
		case kind == websocket.BinaryMessage:
			audio += len(b)
			continue
		default:
			if err := json.Unmarshal(b, &m); err != nil {
				s.t.Fatalf("not JSON: %s", b)
			}
		}
		m.AudioBefore = audio
		out = append(out, m)
		if stop(m) {
			return out
		}
		if m.Type == "close" {
			s.t.Fatalf("closed before the message awaited: %v", out)
		}
	}
}

func dgIs(typ string) func(dgMsg) bool { return func(m dgMsg) bool { return m.Type == typ } }

// TestDeepgramWorkspaceRules: a socket holds one of the workspace's slots
// while open; characters billed are those of the text synthesized, over
// the socket and REST alike; plan refusals are Deepgram-shaped with their
// status and Retry-After; the series carry dialect="deepgram".
func TestDeepgramWorkspaceRules(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: refArgs(0)})
	e := newEnv(t, srv, "pro", "--concurrency", "1", "--billing", "enforce", "--allowance", "100000")
	model := "model=" + e.voice

	t.Run("one slot per socket", func(t *testing.T) {
		s, _ := dgDial(t, srv, e.key, model)
		s.until(dgIs("Metadata"))
		r := dgSpeak(t, srv, e.key, model, "Hi.")
		dgRefused(t, r, 429, "TOO_MANY_REQUESTS", control.EConcurrencyLimited)
		if r.header.Get("Retry-After") == "" {
			t.Fatalf("429 without Retry-After: %v", r.header)
		}
		if _, refused := dgDial(t, srv, e.key, model); refused == nil || refused.status != 429 {
			t.Fatalf("a second socket: %+v", refused)
		}
		s.send("Close", "")
		s.until(dgIs("close"))
		if !poll(5*time.Second, func() bool { return dgSpeak(t, srv, e.key, model, "Hi.").status == 200 }) {
			t.Fatal("the slot was not given back when the socket closed")
		}
	})

	t.Run("billed = characters synthesized", func(t *testing.T) {
		parts := []string{"Hello there. ", "This is the socket, ", "billed as text arrives."}
		before := settledUsed(t, srv.DB, e.ws) // (the last subtest's speaks included)
		s, _ := dgDial(t, srv, e.key, model+"&encoding=mulaw")
		for _, p := range parts {
			s.send("Speak", p)
		}
		s.send("Flush", "")
		if msgs := s.until(dgIs("Flushed")); msgs[len(msgs)-1].AudioBefore == 0 {
			t.Fatalf("no audio before Flushed: %v", msgs)
		}
		s.send("Close", "")
		if m := s.until(dgIs("close")); m[len(m)-1].CloseCode != websocket.CloseNormalClosure {
			t.Fatalf("close: %v", m)
		}
		want := before + int64(len(strings.Join(parts, "")))
		var used int64
		if !poll(5*time.Second, func() bool { used = usedOf(t, srv.DB, e.ws); return used == want }) {
			t.Fatalf("used %d after the socket, want %d", used, want)
		}
		const text = "And this one by REST."
		if r := dgSpeak(t, srv, e.key, model+"&container=none", text); r.status != 200 || r.header.Get("dg-char-count") != "21" {
			t.Fatalf("REST: %d %v", r.status, r.header)
		}
		// (Usage reaches the store at the server's next lease sync.)
		if used = eventuallyUsed(t, srv.DB, e.ws, want+int64(len(text))); used != want+int64(len(text)) {
			t.Fatalf("used %d after REST, want %d", used, want+int64(len(text)))
		}
	})

	t.Run("plan refusals", func(t *testing.T) {
		broke := newEnv(t, srv, "pro", "--billing", "enforce", "--allowance", "10", "--used", "10")
		dgRefused(t, dgSpeak(t, srv, broke.key, "model="+broke.voice, "Hi."), 402, "INSUFFICIENT_CREDITS", control.EQuotaExhausted)
		slow := newEnv(t, srv, "pro", "--rps", "1")
		var refused *resp
		for i := 0; i < 5 && refused == nil; i++ {
			if r := dgSpeak(t, srv, slow.key, "model="+slow.voice+"&container=none", "Hi."); r.status != 200 {
				refused = r
			}
		}
		if refused == nil {
			t.Fatal("rps 1 never refused")
		}
		dgRefused(t, refused, 429, "TOO_MANY_REQUESTS", control.ERateLimited)
		if refused.header.Get("Retry-After") == "" {
			t.Fatal("rate_limited without Retry-After")
		}
		nostream := newEnv(t, srv, "pro", "--streaming", "false")
		_, r := dgDial(t, srv, nostream.key, "model="+nostream.voice)
		if r == nil {
			t.Fatal("a socket without the streaming feature")
		}
		dgRefused(t, r, 403, "INSUFFICIENT_PERMISSIONS", control.EFeatureDisabled)
	})

	t.Run("metrics", func(t *testing.T) {
		m := string(mustCall(t, "GET", srv.URL+"/metrics", nil).body)
		for _, want := range []string{
			`voicesvc_synth_total{dialect="deepgram",outcome="ok",transport="compat"}`,
			`voicesvc_synth_total{dialect="deepgram",outcome="ok",transport="websocket"}`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// TestDeepgramRevocation: a key revoked while its socket speaks ends the
// socket (an Error, then the close) within the change feed's 2 s.
func TestDeepgramRevocation(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: refArgs(1)})
	e := newEnv(t, srv, "pro")
	k := harness.Admin(t, srv.DB, "key", "create", "--workspace", e.ws)
	s, _ := dgDial(t, srv, k["key"].(string), "model="+e.voice)
	s.until(dgIs("Metadata"))
	s.send("Speak", strings.Repeat("This sentence keeps the engine busy. ", 20))
	s.send("Flush", "")
	// The first audio has arrived once a binary frame was read: wait for
	// it by reading with a short deadline.
	s.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		kind, _, err := s.ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if kind == websocket.BinaryMessage {
			break
		}
	}
	harness.Admin(t, srv.DB, "key", "revoke", "--id", k["id"].(string))
	revoked := time.Now()
	msgs := s.until(dgIs("close"))
	took := time.Since(revoked)
	n := len(msgs)
	if n < 2 || msgs[n-2].Type != "Error" || msgs[n-2].Code != control.EUnauthorized {
		t.Fatalf("want an Error unauthorized before the close, got %v", msgs)
	}
	t.Logf("socket closed %v after the revocation (close %d)", took, msgs[n-1].CloseCode)
	if took > 5*time.Second { // the rule is 2 s; loose for a shared machine
		t.Errorf("socket closed %v after the revocation", took)
	}
}

// TestDeepgramBench: `voicesvc bench --target deepgram --native` drives the
// dialect's socket and the native WebSocket of the same server in turn and
// reports what the socket adds (counts only: timings are the bench's).
func TestDeepgramBench(t *testing.T) {
	srv := harness.Start(t, harness.Options{Args: refArgs(0)})
	e := newEnv(t, srv, "pro")
	out, err := exec.Command(harness.Binary(t), "bench", "--target", "deepgram",
		"--base", srv.API+"/compat/deepgram", "--key", e.key, "--voice", e.voice, "--native", srv.URL,
		"--text", "Thanks for calling.", "--sweep", "1,2", "--requests", "4", "--warmup", "0s", "--rounds", "1",
		"--quiet", "--out", t.TempDir()).CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	table := string(out)
	for _, want := range []string{"the native WebSocket and the Deepgram socket", "| 1 |", "| 2 |"} {
		if !strings.Contains(table, want) {
			t.Fatalf("the report lacks %q:\n%s", want, table)
		}
	}
	for _, line := range strings.Split(table, "\n") {
		if strings.HasPrefix(line, "| 1 |") || strings.HasPrefix(line, "| 2 |") {
			if !strings.HasSuffix(line, "| 0/0 |") {
				t.Errorf("errors: %s", line)
			}
		}
	}
}

// TestDeepgramClearRefunds: a Clear while the socket speaks stops it and
// gives back the characters whose synthesis never started: what stays
// billed is the sentences that were synthesized.
func TestDeepgramClearRefunds(t *testing.T) {
	const sentence = "This sentence keeps the engine busy. "
	srv := harness.Start(t, harness.Options{Args: refArgs(1)})
	e := newEnv(t, srv, "pro", "--billing", "enforce", "--allowance", "100000")
	s, _ := dgDial(t, srv, e.key, "model="+e.voice)
	s.until(dgIs("Metadata"))
	s.send("Speak", strings.Repeat(sentence, 20))
	s.send("Flush", "")
	s.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for { // the first audio
		if kind, _, err := s.ws.ReadMessage(); err != nil {
			t.Fatal(err)
		} else if kind == websocket.BinaryMessage {
			break
		}
	}
	s.send("Clear", "")
	msgs := s.until(dgIs("Cleared"))
	for _, m := range msgs {
		if m.Type == "Flushed" {
			t.Fatalf("the cleared text's Flush was answered: %v", msgs)
		}
	}
	s.send("Close", "")
	s.until(dgIs("close"))
	total := int64(20 * len(sentence))
	var used int64
	// At real time a sentence lasts about two seconds: little more than
	// the first few had started when the Clear came.
	// Usage reaches the store at the server's next lease sync: wait for
	// the first sentence's characters, then for the refunds.
	if !poll(5*time.Second, func() bool {
		used = usedOf(t, srv.DB, e.ws)
		return used >= int64(len(sentence))-1 && used < total/2
	}) {
		t.Fatalf("used %d of %d characters after the Clear", used, total)
	}
	t.Logf("billed %d of %d characters", used, total)
}
