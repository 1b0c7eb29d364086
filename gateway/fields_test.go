package gateway

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/websocket"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// TestSharedFieldsOneRule: every field speak, SSE and the WebSocket's
// task_start share is judged by one validator, so the same bad value gets
// the same code on all three. A WebSocket error frame carries the codes the
// protocol names for a field (text_too_long, text_required,
// invalid_language) as they are, and invalid_message for the others, whose
// text names the field (docs/realtime.md#errors).
func TestSharedFieldsOneRule(t *testing.T) {
	ss := newSynthServer(t, synthOpts{})
	long := strings.Repeat("a", 10_001)
	tests := []struct {
		name  string
		field string
		value any
		code  string // "" = accepted
	}{
		{"text number", "text", 42, control.EInvalidRequest},
		{"text too long", "text", long, control.ETextTooLong},
		{"language number", "language", 5, control.EInvalidLanguage},
		{"language malformed", "language", "en_US", control.EInvalidLanguage},
		{"language unsupported", "language", "xx", control.EInvalidLanguage},
		{"language region", "language", "en-GB", ""},
		{"sample_rate string", "sample_rate", "24000", control.EInvalidSampleRate},
		{"sample_rate low", "sample_rate", 7999, control.EInvalidSampleRate},
		{"sample_rate fraction", "sample_rate", 24000.5, control.EInvalidSampleRate},
		{"sample_rate ok", "sample_rate", 16000, ""},
		{"num_step high", "num_step", 33, control.EInvalidNumStep},
		{"num_step string", "num_step", "4", control.EInvalidNumStep},
		{"num_step ok", "num_step", 8, ""},
		{"expressiveness high", "expressiveness", 1.5, control.EInvalidExpressive},
		{"expressiveness string", "expressiveness", "0.5", control.EInvalidExpressive},
		{"expressiveness ok", "expressiveness", 0.5, ""},
	}
	conn, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := map[string]any{"text": "Hello.", tc.field: tc.value}
			for _, path := range []string{"/voices/" + ss.voice + "/speak", "/voices/" + ss.voice + "/stream"} {
				resp := ss.post(path, ss.key, body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				var e struct{ Code string }
				_ = json.Unmarshal(b, &e)
				if tc.code == "" && resp.StatusCode != 200 || tc.code != "" && (resp.StatusCode != 400 || e.Code != tc.code) {
					t.Fatalf("%s: %d %s, want %q", path, resp.StatusCode, b, tc.code)
				}
			}
			id := "ctx" + string(rune('a'+i))
			msg := map[string]any{"type": "task_start", "context_id": id, "voice_id": ss.voice,
				"text": "Hello.", "finalize": true, tc.field: tc.value}
			got := wsOutcome(t, conn, msg, id)
			want := "task_done"
			if tc.code != "" {
				want = tc.code
				switch tc.code {
				case control.ETextTooLong, control.ETextRequired, control.EInvalidLanguage:
				default:
					want = "invalid_message"
				}
			}
			if got != want {
				t.Fatalf("task_start: %s, want %s", got, want)
			}
		})
	}
}

// wsOutcome sends a task_start and returns the code of the error frame it
// got, or "task_done".
func wsOutcome(t *testing.T, c *websocket.Conn, msg map[string]any, id string) string {
	t.Helper()
	if err := c.WriteJSON(msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		typ, b, err := c.ReadMessage()
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if typ != websocket.TextMessage {
			continue
		}
		var f struct {
			Type      string `json:"type"`
			Code      string `json:"code"`
			ContextID string `json:"context_id"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		switch {
		case f.Type == "error" && f.ContextID == id:
			return f.Code
		case f.Type == "task_done" && f.ContextID == id:
			return "task_done"
		case f.Type == "error" || f.Type == "task_failed":
			t.Fatalf("unexpected %s", b)
		}
	}
}

// recordingEngine remembers the parameters of every request.
type recordingEngine struct {
	engine.Engine
	mu     sync.Mutex
	params []engine.Params
}

func (r *recordingEngine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	r.mu.Lock()
	r.params = append(r.params, req.Params)
	r.mu.Unlock()
	return r.Engine.Synthesize(ctx, req, emit)
}

func (r *recordingEngine) take() []engine.Params {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.params
	r.params = nil
	return p
}

// TestVoiceSettingsOneMerge: the voice's stored settings are the defaults
// of every transport alike; the WebSocket once ignored the voice's style
// (its default expressiveness) that speak applied.
func TestVoiceSettingsOneMerge(t *testing.T) {
	rec := &recordingEngine{Engine: reference.New()}
	ss := newSynthServer(t, synthOpts{eng: rec})
	style, speed := 0.3, 1.25
	now := control.NowMS()
	v := &control.Voice{ID: control.NewID(), OrgID: ss.ws.ID, Name: "styled", Status: control.VoiceReady,
		CloneMethod: "instant", Visibility: "private", PrimaryLanguage: "en", Labels: []control.Label{},
		Settings: &control.VoiceSettings{Style: &style, Speed: &speed},
		Profile:  reference.MarshalProfile(200), ConsentAt: now, CreatedAt: now, UpdatedAt: now}
	if err := ss.store.CreateVoice(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	resp := ss.post("/voices/"+v.ID+"/speak", ss.key, map[string]any{"text": "Hello."})
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conn, _, err := ss.wsDial("", wsKey(ss.key))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if got := wsOutcome(t, conn, map[string]any{"type": "task_start", "context_id": "c", "voice_id": v.ID,
		"text": "Hello.", "finalize": true}, "c"); got != "task_done" {
		t.Fatalf("task_start: %s", got)
	}
	params := rec.take()
	if len(params) != 2 {
		t.Fatalf("%d engine requests, want 2 (speak, one sentence)", len(params))
	}
	for i, p := range params {
		transport := []string{"speak", "websocket"}[i]
		if p.Expressiveness == nil || *p.Expressiveness != style || p.Speed != speed {
			t.Errorf("%s: expressiveness %v speed %v, want the voice's %v and %v", transport, p.Expressiveness, p.Speed, style, speed)
		}
	}
}
