package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/fasthttp/websocket"
)

// Env is a workspace on a server's store: its key (and the key's id, for
// revocation) and a ready voice.
type Env struct {
	Srv                   *Server
	WS, Key, KeyID, Voice string
}

// NewEnv makes a workspace on plan, applies workspace update flags (e.g.
// "--rps", "0"), mints a key and picks a ready catalog voice.
func (s *Suite) NewEnv(srv *Server, plan string, update ...string) (*Env, error) {
	ws, err := s.Admin(srv.DB, "workspace", "create", "--name", "chaos-"+plan, "--plan", plan)
	if err != nil {
		return nil, err
	}
	e := &Env{Srv: srv, WS: ws["id"].(string)}
	if len(update) > 0 {
		if _, err := s.Admin(srv.DB, append([]string{"workspace", "update", "--id", e.WS}, update...)...); err != nil {
			return nil, err
		}
	}
	if err := e.NewKey(s); err != nil {
		return nil, err
	}
	r := Call("GET", srv.API+"/voices?page_size=100", nil, "X-API-Key", e.Key)
	if r.Status != 200 {
		return nil, fmt.Errorf("GET /voices: %s", r.Outcome())
	}
	for _, v := range r.Data()["voices"].([]any) {
		if m, _ := v.(map[string]any); m["status"] == "ready" {
			lang, _ := m["primary_language"].(string)
			if e.Voice == "" || strings.HasPrefix(lang, "en") {
				e.Voice = m["id"].(string)
			}
			if strings.HasPrefix(lang, "en") {
				break
			}
		}
	}
	if e.Voice == "" {
		return nil, fmt.Errorf("no ready voice: %.300s", r.Body)
	}
	return e, nil
}

// NewKey replaces the env's key with a new one of the same workspace.
func (e *Env) NewKey(s *Suite) error {
	k, err := s.Admin(e.Srv.DB, "key", "create", "--workspace", e.WS)
	if err != nil {
		return err
	}
	e.Key, e.KeyID = k["key"].(string), k["id"].(string)
	s.Secret(e.Key)
	return nil
}

// Balance is the workspace's used characters and remaining credits.
func (s *Suite) Balance(db, ws string) (used, credits int64, err error) {
	m, err := s.Admin(db, "workspace", "update", "--id", ws)
	if err != nil {
		return 0, 0, err
	}
	u, _ := m["used"].(float64)
	c, _ := m["credits"].(float64)
	return int64(u), int64(c), nil
}

// Resp is a read HTTP response (Status 0: transport error in Err).
type Resp struct {
	Status int
	Header http.Header
	Body   []byte
	Err    error
}

// Code is the envelope's code, or a flat body's error string.
func (r *Resp) Code() string {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return ""
	}
	if c, ok := m["code"].(string); ok {
		return c
	}
	switch e := m["error"].(type) {
	case string:
		return e
	case map[string]any: // the compatible endpoint's {"error": {"code": ...}}
		if c, ok := e["code"].(string); ok {
			return c
		}
	}
	return ""
}

// Outcome is "200", "503 store_unavailable" or the transport error.
func (r *Resp) Outcome() string {
	if r.Status == 0 {
		return fmt.Sprintf("transport error: %v", r.Err)
	}
	s := strconv.Itoa(r.Status)
	if c := r.Code(); c != "" && r.Status >= 400 {
		s += " " + c
	}
	return s
}

// Data is a success envelope's data (empty when it is not one).
func (r *Resp) Data() map[string]any {
	var m struct {
		Data map[string]any `json:"data"`
	}
	json.Unmarshal(r.Body, &m)
	if m.Data == nil {
		return map[string]any{}
	}
	return m.Data
}

var httpClient = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
	MaxIdleConns: 200, MaxIdleConnsPerHost: 100, IdleConnTimeout: 10 * time.Second,
}}

// Call sends a request; body is nil, a string, []byte, or a value sent as
// JSON; headers are name, value pairs. The body read is capped at 64 MiB.
func Call(method, url string, body any, headers ...string) *Resp {
	return CallWith(httpClient, method, url, body, headers...)
}

// CallWith is Call on client c.
func CallWith(c *http.Client, method, url string, body any, headers ...string) *Resp {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return &Resp{Err: err}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hr, err := c.Do(req)
	if err != nil {
		return &Resp{Err: err}
	}
	defer hr.Body.Close()
	b, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	return &Resp{Status: hr.StatusCode, Header: hr.Header, Body: b, Err: err}
}

// Speak synthesizes a short text as raw PCM.
func (e *Env) Speak(text string) *Resp {
	return Call("POST", e.Srv.API+"/voices/"+e.Voice+"/speak",
		map[string]any{"text": text, "output_format": "s16le"}, "X-API-Key", e.Key)
}

// WSURL is the realtime endpoint of srv.
func (srv *Server) WSURL() string { return "ws://" + srv.Addr + APIPath + "/stream" }

var wsDialer = &websocket.Dialer{HandshakeTimeout: 30 * time.Second, ReadBufferSize: 4096, WriteBufferSize: 4096}

// DialWS opens a realtime session with the env's key.
func (e *Env) DialWS() (*websocket.Conn, error) {
	c, r, err := wsDialer.Dial(e.Srv.WSURL(), http.Header{"X-Api-Key": {e.Key}})
	if err != nil {
		if r != nil {
			b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
			r.Body.Close()
			return nil, fmt.Errorf("handshake %d %s: %w", r.StatusCode, b, err)
		}
		return nil, err
	}
	return c, nil
}

// WSFrame is one server message as the probes see it: a JSON text frame
// decoded, a binary frame's length, or the close that ended the session.
type WSFrame struct {
	JSON      map[string]any
	Binary    int
	CloseCode int // set on the last frame when the server closed (0: no close frame)
	Err       error
}

// Type is the JSON frame's type ("" for binary frames and the end).
func (f WSFrame) Type() string { s, _ := f.JSON["type"].(string); return s }

// ReadWS reads frames until the connection ends or limit passes, calling
// each for every frame; each returning false stops the reading.
func ReadWS(c *websocket.Conn, limit time.Duration, each func(WSFrame) bool) WSFrame {
	c.SetReadDeadline(time.Now().Add(limit))
	for {
		mt, b, err := c.ReadMessage()
		if err != nil {
			end := WSFrame{Err: err}
			var ce *websocket.CloseError
			if errorsAs(err, &ce) {
				end.CloseCode = ce.Code
			}
			return end
		}
		f := WSFrame{}
		if mt == websocket.BinaryMessage {
			f.Binary = len(b)
		} else {
			json.Unmarshal(b, &f.JSON)
		}
		if !each(f) {
			return f
		}
	}
}

// rawDial opens a TCP connection to srv with a small receive buffer, so a
// client that does not read fills up quickly.
func rawDial(addr string, rcvbuf int) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if rcvbuf > 0 {
		d.Control = smallRcvBuf(rcvbuf)
	}
	return d.Dial("tcp", addr)
}
