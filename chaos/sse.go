package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// SSEEvent is one server-sent event: its type and decoded data.
type SSEEvent struct {
	Type string
	Data map[string]any
}

// Code is an error event's code.
func (e SSEEvent) Code() string { c, _ := e.Data["code"].(string); return c }

// SSE streams text and returns every event (limit bounds the whole stream).
func (e *Env) SSE(text string, limit time.Duration) ([]SSEEvent, error) {
	var evs []SSEEvent
	err := e.SSEEach(text, limit, func(ev SSEEvent) bool { evs = append(evs, ev); return true })
	return evs, err
}

// SSEEach streams text and calls each for every event as it arrives (chunk
// events without their audio); each returning false ends the stream.
func (e *Env) SSEEach(text string, limit time.Duration, each func(SSEEvent) bool) error {
	body, _ := json.Marshal(map[string]any{"text": text, "output_format": "s16le"})
	req, _ := http.NewRequest("POST", e.Srv.API+"/voices/"+e.Voice+"/stream", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", e.Key)
	c := &http.Client{Timeout: limit, Transport: &http.Transport{DisableKeepAlives: true}}
	r, err := c.Do(req)
	if err != nil {
		return err
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<10))
		return fmt.Errorf("stream: status %s", (&Resp{Status: r.StatusCode, Body: b}).Outcome())
	}
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	ev := SSEEvent{}
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "event:"):
			ev.Type = strings.TrimSpace(l[len("event:"):])
		case strings.HasPrefix(l, "data:"):
			d := strings.TrimSpace(l[len("data:"):])
			if !strings.Contains(d, `"audio_b64"`) {
				json.Unmarshal([]byte(d), &ev.Data)
			}
			if ev.Type == "" && ev.Data != nil {
				ev.Type, _ = ev.Data["type"].(string)
			}
			if ev.Type == "" && strings.Contains(d, `"type":"chunk"`) {
				ev.Type = "chunk"
			}
		case l == "":
			if ev.Type != "" {
				if !each(ev) {
					return nil
				}
			}
			ev = SSEEvent{}
		}
	}
	return sc.Err()
}

// lastType is the type of the last event ("" for none).
func lastType(evs []SSEEvent) string {
	if len(evs) == 0 {
		return ""
	}
	return evs[len(evs)-1].Type
}
