package deepgram

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
)

func testWire() *wire {
	return &wire{model: "aura-2-thalia-en", voiceID: "7ae458854d3d8f6f39334073", requestID: "req_1",
		options: synth.Options{Format: codec.S16LE, SampleRate: 16000, Language: "en"}}
}

// TestWireParse: each message is the session's command, Flush and Clear
// share one sequence, and Speak opens the socket's one context with the
// handshake's voice and format.
func TestWireParse(t *testing.T) {
	w := testWire()
	var cmds []sessions.Command
	for _, m := range []string{
		`{"type":"Speak","text":"Hello there. "}`,
		`{"type":"Speak","text":"More"}`,
		`{"type":"Flush"}`,
		`{"type":"Clear"}`,
		`{"type":"Flush","extra":[1,2]}`,
		`{"type":"Close"}`,
	} {
		var err error
		if cmds, err = w.Parse([]byte(m), cmds); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	kinds := []sessions.CommandKind{sessions.Speak, sessions.Speak, sessions.Flush, sessions.Clear, sessions.Reply,
		sessions.Flush, sessions.EndSession}
	if len(cmds) != len(kinds) {
		t.Fatalf("%d commands: %+v", len(cmds), cmds)
	}
	for i, k := range kinds {
		if cmds[i].Kind != k {
			t.Fatalf("command %d is %d, want %d", i, cmds[i].Kind, k)
		}
	}
	sp := cmds[0]
	if sp.Context != contextID || sp.Text != "Hello there. " || sp.Open == nil || sp.Open.Voice != w.voiceID ||
		sp.Open.Options.Format != codec.S16LE || sp.Open.Options.SampleRate != 16000 || sp.Open.Buffer.IdleFlush >= 0 {
		t.Fatalf("Speak: %+v %+v", sp, sp.Open)
	}
	if cmds[2].FlushID != "0" || cmds[4].Text != `{"type":"Cleared","sequence_id":1}` || cmds[5].FlushID != "2" {
		t.Fatalf("sequence: %q %q %q", cmds[2].FlushID, cmds[4].Text, cmds[5].FlushID)
	}
	if !cmds[6].Graceful {
		t.Fatal("Close ends the session at once")
	}
	if got := string(encoder{}.Flushed(nil, "7")); got != `{"type":"Flushed","sequence_id":7}` {
		t.Fatalf("Flushed: %s", got)
	}
}

// TestWireRefusals: what the session answers with a Warning.
func TestWireRefusals(t *testing.T) {
	for _, tt := range []struct{ msg, code string }{
		{`not json`, sessions.CodeInvalidMessage},
		{`[]`, sessions.CodeInvalidMessage},
		{`{}`, sessions.CodeInvalidMessage},
		{`{"type":5}`, control.EInvalidRequest},
		{`{"type":"speak","text":"hi"}`, sessions.CodeInvalidMessage},
		{`{"type":"Speak","text":42}`, control.EInvalidRequest},
		{`{"type":"Speak","text":"` + strings.Repeat("a", synth.MaxTextChars+1) + `"}`, control.ETextTooLong},
	} {
		_, err := testWire().Parse([]byte(tt.msg), nil)
		var r *sessions.Refusal
		code := ""
		switch {
		case errors.As(err, &r):
			code = r.Code
		case err != nil:
			code = control.AsError(err).Code
		}
		if code != tt.code {
			t.Errorf("%.40s: %v, want %s", tt.msg, err, tt.code)
		}
	}
	// An empty Speak adds nothing but is no error.
	if cmds, err := testWire().Parse([]byte(`{"type":"Speak","text":""}`), nil); err != nil || len(cmds) != 1 {
		t.Fatalf("empty Speak: %v %v", cmds, err)
	}
}

// TestWireMessages: Metadata, Warning and Error are the shapes the SDK
// types and the plugins read.
func TestWireMessages(t *testing.T) {
	var meta map[string]any
	if err := json.Unmarshal(testWire().Hello(nil), &meta); err != nil {
		t.Fatal(err)
	}
	if meta["type"] != "Metadata" || meta["model_name"] != "aura-2-thalia-en" || meta["model_uuid"] != "7ae458854d3d8f6f39334073" ||
		meta["request_id"] != "req_1" || meta["model_version"] == "" {
		t.Fatalf("Metadata: %v", meta)
	}
	for _, fatal := range []bool{false, true} {
		var m map[string]string
		b := testWire().AppendError(nil, contextID, "invalid_message", `bad "quote"`, fatal)
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		typ, legacy := "Warning", "warn_"
		if fatal {
			typ, legacy = "Error", "err_"
		}
		if m["type"] != typ || m["description"] != `bad "quote"` || m["code"] != "invalid_message" ||
			m[legacy+"code"] != "invalid_message" || m[legacy+"msg"] != `bad "quote"` {
			t.Fatalf("%s", b)
		}
	}
	text, bin := encoder{}.Audio(nil, nil, &sessions.Audio{Bytes: []byte{1, 2, 3}})
	if len(text) != 0 || string(bin) != "\x01\x02\x03" {
		t.Fatalf("audio: text %q, binary %v", text, bin)
	}
}

// FuzzWireParse: any client message is commands the session knows or a
// refusal whose Warning is valid JSON; never a panic.
func FuzzWireParse(f *testing.F) {
	for _, s := range []string{`{"type":"Speak","text":"Hi."}`, `{"type":"Flush"}`, `{"type":"Clear"}`,
		`{"type":"Close"}`, `{"type":"Speak","text":"\ud800"}`, `{"type":"Speak","text":null,"type":"Flush"}`,
		`{"ty\u0070e":"Clear"}`, `{"type":"Speak","text":{"a":1}}`, `"Speak"`, `{"type":"Speak"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if !utf8.Valid(msg) {
			return // the session refuses invalid UTF-8 before Parse
		}
		w := testWire()
		cmds, err := w.Parse(msg, nil)
		if err != nil {
			var r *sessions.Refusal
			code, text := "", err.Error()
			if errors.As(err, &r) {
				code, text = r.Code, r.Message
			} else if e := control.AsError(err); e.Code != control.EInternal {
				code, text = e.Code, e.Message
			} else {
				t.Fatalf("refusal of no known kind: %v", err)
			}
			if b := w.AppendError(nil, "", code, text, false); !json.Valid(b) {
				t.Fatalf("Warning is not JSON: %s", b)
			}
			return
		}
		if len(cmds) == 0 {
			t.Fatal("no command and no error")
		}
		for _, c := range cmds {
			switch c.Kind {
			case sessions.Speak:
				if c.Open == nil || c.Context != contextID || !utf8.ValidString(c.Text) {
					t.Fatalf("Speak %+v", c)
				}
			case sessions.Flush, sessions.Clear, sessions.EndSession:
			case sessions.Reply:
				if !json.Valid([]byte(c.Text)) {
					t.Fatalf("Reply %q", c.Text)
				}
			default:
				t.Fatalf("command %d", c.Kind)
			}
		}
	})
}
