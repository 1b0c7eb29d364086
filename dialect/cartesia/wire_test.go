package cartesia

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"voicesvc/control"
	"voicesvc/sessions"
	"voicesvc/synth"
)

const fmt16 = `"voice":"v","output_format":{"container":"raw","encoding":"pcm_s16le","sample_rate":16000}`

// TestWireParse: the socket's messages, as the official client and
// LiveKit's plugin send them, read as the session's commands.
func TestWireParse(t *testing.T) {
	type cmd struct {
		Kind     sessions.CommandKind
		Context  string
		Text     string
		Finalize bool
		FlushID  string
		IfOpen   bool
		Buffer   *sessions.Buffer // of an Open
	}
	immediate := &sessions.Buffer{Immediate: true}
	deflt := &sessions.Buffer{IdleFlush: 3 * time.Second}
	cases := []struct {
		name string
		msgs []string // sent in order on one socket; the last one's commands are checked
		want []cmd
		code string // the last message is refused with this code
	}{
		{"push (continue)", []string{`{"context_id":"a","transcript":"Hi ","continue":true,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "Hi ", Buffer: deflt}}, ""},
		{"LiveKit: no buffering", []string{`{"context_id":"a","transcript":"Hi. ","continue":true,"max_buffer_delay_ms":0,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "Hi. ", Buffer: immediate}}, ""},
		{"one-shot: continue absent ends the input", []string{`{"context_id":"a","transcript":"Hi.",` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "Hi.", Finalize: true, Buffer: deflt}}, ""},
		{"no_more_inputs", []string{`{"context_id":"a","transcript":"","continue":false,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Finalize: true, Buffer: deflt}}, ""},
		{"flushes count per context", []string{
			`{"context_id":"a","transcript":"","continue":true,"flush":true,` + fmt16 + `}`,
			`{"context_id":"b","transcript":"","continue":true,"flush":true,` + fmt16 + `}`,
			`{"context_id":"a","transcript":"x","continue":true,"flush":true,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "x", Buffer: deflt}, {Kind: sessions.Flush, Context: "a", FlushID: "2"}}, ""},
		{"flush with the last input: flushed, then ended", []string{`{"context_id":"a","transcript":"x","flush":true,"max_buffer_delay_ms":250,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "x", Buffer: &sessions.Buffer{IdleFlush: 250 * time.Millisecond}},
				{Kind: sessions.Flush, Context: "a", FlushID: "1"}, {Kind: sessions.Append, Context: "a", Finalize: true}}, ""},
		{"a context's numbering restarts once it ended", []string{
			`{"context_id":"a","transcript":"x","flush":true,` + fmt16 + `}`,
			`{"context_id":"a","transcript":"y","continue":true,"flush":true,` + fmt16 + `}`},
			[]cmd{{Kind: sessions.Speak, Context: "a", Text: "y", Buffer: deflt}, {Kind: sessions.Flush, Context: "a", FlushID: "1"}}, ""},
		{"cancel", []string{`{"context_id":"a","cancel":true}`}, []cmd{{Kind: sessions.Cancel, Context: "a", IfOpen: true}}, ""},
		{"refused: no context", []string{`{"transcript":"x",` + fmt16 + `}`}, nil, control.EInvalidRequest},
		{"refused: not JSON", []string{`{`}, nil, control.EInvalidJSON},
		{"refused: a container SSE and the socket lack", []string{`{"context_id":"a","transcript":"x","voice":"v","output_format":{"container":"mp3"}}`},
			nil, control.EInvalidOutputFormat},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWire("req_1")
			var cmds []sessions.Command
			var err error
			for _, m := range tc.msgs {
				cmds, err = w.Parse([]byte(m), nil)
			}
			if tc.code != "" {
				r, ok := err.(*sessions.Refusal)
				if !ok || r.Code != tc.code {
					t.Fatalf("got %v, want a refusal %s", err, tc.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []cmd
			for _, c := range cmds {
				g := cmd{Kind: c.Kind, Context: c.Context, Text: c.Text, Finalize: c.Finalize, FlushID: c.FlushID, IfOpen: c.IfOpen}
				if c.Open != nil {
					b := c.Open.Buffer
					g.Buffer = &b
					if c.Open.Voice != "v" || c.Open.Options.Language != "en" {
						t.Fatalf("open params %+v", c.Open)
					}
				}
				got = append(got, g)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestEvents: the server messages parse as LiveKit's plugin's schemas
// require (done, status_code and context_id everywhere, step_time on
// chunks) and as the official client reads them.
func TestEvents(t *testing.T) {
	enc := newWire("req_9").Encoder(&sessions.ContextInfo{ID: "c\"1"})
	audio, _ := enc.Audio(nil, nil, &sessions.Audio{Bytes: []byte{1, 2, 3, 4}})
	words := enc.Words(nil, 0, "Hi there", 0, []synth.Word{{Word: "Hi", StartS: 0, EndS: 0.25}, {Word: "there", StartS: 0.25, EndS: 0.6}})
	flushed := enc.Flushed(nil, "3")
	done := enc.Done(nil, &sessions.Done{})
	failed := enc.Failed(nil, control.EUpstreamBusy, 1, 0, "t")
	refused := newWire("req_9").AppendError(nil, "c\"1", sessions.CodeVoiceNotFound, `voice "x" not found`, false)
	for _, tc := range []struct {
		msg  []byte
		want map[string]any
	}{
		{audio, map[string]any{"type": "chunk", "data": "AQIDBA==", "done": false, "status_code": 200.0}},
		{words, map[string]any{"type": "timestamps", "done": false, "status_code": 200.0,
			"word_timestamps": map[string]any{"words": []any{"Hi", "there"}, "start": []any{0.0, 0.25}, "end": []any{0.25, 0.6}}}},
		{flushed, map[string]any{"type": "flush_done", "done": false, "flush_done": true, "flush_id": 3.0, "status_code": 200.0}},
		{done, map[string]any{"type": "done", "done": true, "status_code": 200.0}},
		{failed, map[string]any{"type": "error", "done": true, "status_code": 503.0, "error_code": "upstream_busy",
			"title": "Service Unavailable", "request_id": "req_9"}},
		{refused, map[string]any{"type": "error", "done": true, "status_code": 404.0, "error_code": "voice_not_found",
			"message": `voice "x" not found`, "error": `voice "x" not found`}},
	} {
		var m map[string]any
		if err := json.Unmarshal(tc.msg, &m); err != nil {
			t.Fatalf("%s: %v", tc.msg, err)
		}
		if m["context_id"] != "c\"1" {
			t.Fatalf("%s: context_id", tc.msg)
		}
		for k, v := range tc.want {
			if !reflect.DeepEqual(m[k], v) {
				t.Fatalf("%s: %s is %v, want %v", tc.msg, k, m[k], v)
			}
		}
		if m["type"] == "chunk" {
			if _, ok := m["step_time"].(float64); !ok {
				t.Fatalf("%s: no step_time", tc.msg)
			}
		}
	}
	// Without a context (SSE without context_id) the key is left out.
	if b := appendDone(nil, ""); string(b) != `{"type":"done","done":true,"status_code":200}` {
		t.Fatalf("%s", b)
	}
}

// TestPageOf: the voice list's cursor paging as the official client walks
// it (starting_after the last id until an empty page), and backwards.
func TestPageOf(t *testing.T) {
	var list []*control.Voice
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		list = append(list, &control.Voice{ID: id})
	}
	ids := func(vs []*control.Voice) string {
		var s []string
		for _, v := range vs {
			s = append(s, v.ID)
		}
		return strings.Join(s, "")
	}
	for _, tc := range []struct {
		after, before string
		limit         int
		want          string
		more          bool
	}{
		{"", "", 2, "ab", true}, {"b", "", 2, "cd", true}, {"d", "", 2, "e", false}, {"e", "", 2, "", false},
		{"", "", 10, "abcde", false}, {"gone", "", 2, "", false},
		{"", "d", 2, "bc", true}, {"", "b", 2, "a", false}, {"", "gone", 2, "", false},
	} {
		page, more := pageOf(list, tc.after, tc.before, tc.limit)
		if ids(page) != tc.want || more != tc.more {
			t.Errorf("after %q before %q limit %d: %q %v, want %q %v", tc.after, tc.before, tc.limit, ids(page), more, tc.want, tc.more)
		}
	}
}

// FuzzWireParse: whatever a client sends on the socket, Parse never
// panics; a refusal is a *sessions.Refusal with a code, and accepted
// messages make commands on the context they name, with valid UTF-8 text.
func FuzzWireParse(f *testing.F) {
	for _, s := range []string{
		`{"context_id":"a","transcript":"Hi ","continue":true,` + fmt16 + `}`,
		`{"context_id":"a","transcript":"","continue":true,"flush":true,"max_buffer_delay_ms":0,` + fmt16 + `}`,
		`{"context_id":"a","cancel":true}`,
		`{"context_id":"a","transcript":"x","voice":{"mode":"id","id":"v"},"output_format":{"container":"raw","encoding":"pcm_alaw","sample_rate":8000},"generation_config":{"speed":1.5}}`,
		`{"context_id":1}`, `null`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	w := newWire("req")
	f.Fuzz(func(t *testing.T, msg []byte) {
		cmds, err := w.Parse(msg, nil)
		if err != nil {
			if r, ok := err.(*sessions.Refusal); !ok || r.Code == "" || r.Message == "" {
				t.Fatalf("not a refusal: %#v", err)
			}
			return
		}
		if len(cmds) == 0 {
			t.Fatal("accepted with no command")
		}
		for _, c := range cmds {
			if c.Context == "" || !utf8.ValidString(c.Text) {
				t.Fatalf("command %+v", c)
			}
			if c.Kind == sessions.Speak && c.Open == nil {
				t.Fatal("a speak without its open params")
			}
		}
	})
}
