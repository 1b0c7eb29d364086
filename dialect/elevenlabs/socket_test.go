package elevenlabs

import (
	"errors"
	"testing"

	"voicesvc/codec"
	"voicesvc/sessions"
	"voicesvc/synth"
)

func testWire(multi, auto bool) *wire {
	return &wire{voice: "v", options: synth.Options{Format: codec.S16LE, SampleRate: 16000}, multi: multi, auto: auto,
		seen: map[string]bool{}}
}

// TestWireParse: the messages of both sockets as commands.
func TestWireParse(t *testing.T) {
	type cmd struct {
		kind     sessions.CommandKind
		ctx      string
		text     string
		finalize bool
	}
	for i, tc := range []struct {
		multi, auto bool
		msgs        []string
		want        []cmd // of the last message
		schedule    []int // of the last Open
		immediate   bool
	}{
		{msgs: []string{`{"text":" ","voice_settings":{"speed":1.1}}`}, want: []cmd{{sessions.Speak, "0", "", false}}, schedule: defaultSchedule},
		{msgs: []string{`{"text":" "}`, `{"text":" "}`}, want: []cmd{{sessions.Speak, "0", " ", false}}, schedule: defaultSchedule},
		{msgs: []string{`{"text":" "}`, `{"text":"Hi ","flush":true,"try_trigger_generation":true}`},
			want: []cmd{{sessions.Speak, "0", "Hi ", false}, {sessions.Flush, "0", "", false}}, schedule: defaultSchedule},
		{msgs: []string{`{"text":" "}`, `{"text":"","flush":true}`},
			want: []cmd{{sessions.Append, "0", "", true}, {sessions.EndSession, "", "", false}}},
		{msgs: []string{`{"text":" "}`, `{"text":""}`, `{"text":""}`}, want: nil},
		{msgs: []string{`{"text":" ","generation_config":{"chunk_length_schedule":[50,90.0]}}`},
			want: []cmd{{sessions.Speak, "0", "", false}}, schedule: []int{50, 90}},
		{auto: true, msgs: []string{`{"text":"Hello. "}`}, want: []cmd{{sessions.Speak, "0", "Hello. ", false}}, immediate: true},
		{multi: true, msgs: []string{`{"text":" ","context_id":"a"}`, `{"text":"","context_id":"a"}`}, want: nil},
		{multi: true, msgs: []string{`{"text":"","context_id":"a","flush":true}`, `{"context_id":"a","close_context":true}`},
			want: []cmd{{sessions.Append, "a", "", true}}},
		{multi: true, msgs: []string{`{"context_id":"b","flush":true}`}, want: []cmd{{sessions.Flush, "b", "", false}}},
		{multi: true, msgs: []string{`{"close_socket":true}`}, want: []cmd{{sessions.EndSession, "", "", false}}},
		{multi: true, msgs: []string{`{"text":"x"}`}, want: []cmd{{sessions.Speak, "0", "x", false}}, schedule: defaultSchedule},
	} {
		w := testWire(tc.multi, tc.auto)
		var cmds []sessions.Command
		for _, m := range tc.msgs {
			var err error
			if cmds, err = w.Parse([]byte(m), nil); err != nil {
				t.Fatalf("%d %s: %v", i, m, err)
			}
		}
		if len(cmds) != len(tc.want) {
			t.Fatalf("%d: %+v, want %+v", i, cmds, tc.want)
		}
		for j, c := range cmds {
			if w := tc.want[j]; c.Kind != w.kind || c.Context != w.ctx || c.Text != w.text || c.Finalize != w.finalize {
				t.Errorf("%d: command %d %+v, want %+v", i, j, c, w)
			}
			if c.Kind == sessions.Speak {
				if c.Open == nil || c.Open.Voice != "v" || len(c.Open.Buffer.Schedule) != len(tc.schedule) ||
					c.Open.Buffer.Immediate != tc.immediate {
					t.Errorf("%d: open %+v", i, c.Open)
				}
			}
		}
	}
}

// TestWireRefusals: wrong types and out-of-range settings refuse the
// message with a code; the socket goes on.
func TestWireRefusals(t *testing.T) {
	for _, m := range []string{`{"text":5}`, `[]`, `{"flush":"yes"}`, `{"text":" ","voice_settings":{"speed":7}}`,
		`{"text":" ","voice_settings":[]}`, `{"text":" ","generation_config":{"chunk_length_schedule":[10]}}`,
		`{"text":" ","generation_config":{"chunk_length_schedule":[]}}`, `{"text":" ","generation_config":{"chunk_length_schedule":["a"]}}`} {
		_, err := testWire(true, false).Parse([]byte(m), nil)
		var r *sessions.Refusal
		if !errors.As(err, &r) || r.Code == "" || r.Message == "" {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// FuzzWireParse: any message is commands or a refusal, never a panic;
// commands name a context, and a Speak carries how to open it.
func FuzzWireParse(f *testing.F) {
	for _, s := range []string{`{"text":" ","voice_settings":{"speed":1.1},"generation_config":{"chunk_length_schedule":[50]}}`,
		`{"text":"Hi ","context_id":"a","flush":true}`, `{"context_id":"a","close_context":true}`, `{"close_socket":true}`,
		`{"text":""}`, `{"text":null,"context_id":null}`} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, b []byte, multi bool) {
		w := testWire(multi, false)
		for range 2 { // the second as a context already seen
			cmds, err := w.Parse(b, nil)
			if err != nil {
				var r *sessions.Refusal
				if !errors.As(err, &r) || r.Code == "" {
					t.Fatalf("%q: %v", b, err)
				}
				return
			}
			for _, c := range cmds {
				switch {
				case c.Kind != sessions.EndSession && c.Context == "":
					t.Fatalf("%q: %+v names no context", b, c)
				case c.Kind == sessions.Speak && c.Open == nil:
					t.Fatalf("%q: speak without open", b)
				}
			}
		}
	})
}
