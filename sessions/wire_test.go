package sessions

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"voicesvc/codec"
	"voicesvc/control"
	"voicesvc/engine/reference"
	"voicesvc/synth"
)

// testWire is a small protocol of its own, shaped like the vendors'
// sockets: one implicit context per id, opened by its first text; binary
// audio alone; a greeting; flush, clear and close messages; and a buffer
// policy chosen by the socket. It proves the session serves a Wire other
// than the native one with the same rules.
type testWire struct {
	buffer Buffer
	seq    int
}

type testMsg struct {
	Op      string `json:"op"`
	Context string `json:"context"`
	Text    string `json:"text"`
	Done    bool   `json:"done"`
	ID      string `json:"id"`
}

func (w *testWire) Hello(b []byte) []byte { return append(b, `{"hello":true}`...) }

func (w *testWire) Parse(b []byte, cmds []Command) ([]Command, error) {
	var m testMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return cmds, Invalid("", "not a message")
	}
	switch m.Op {
	case "speak":
		return append(cmds, Command{Kind: Speak, Context: m.Context, Text: m.Text, Finalize: m.Done,
			Open: &OpenParams{Voice: voiceReady, Options: synth.Options{Format: codec.S16LE, SampleRate: 16000, Language: "en"},
				Buffer: w.buffer}}), nil
	case "flush":
		return append(cmds, Command{Kind: Flush, Context: m.Context, FlushID: m.ID}), nil
	case "clear":
		w.seq++
		return append(cmds, Command{Kind: Clear}, Command{Kind: Reply, Text: `{"cleared":` + strconv.Itoa(w.seq) + `}`}), nil
	case "close":
		return append(cmds, Command{Kind: EndSession, Graceful: true}), nil
	}
	return cmds, Invalid(m.Context, "unknown op %q", m.Op)
}

func (w *testWire) Encoder(c *ContextInfo) Encoder { return testEncoder{id: c.ID} }

func (w *testWire) AppendError(b []byte, contextID, code, msg string, fatal bool) []byte {
	return append(b, `{"error":"`+code+`"}`...)
}

func (w *testWire) AppendSessionEnded(b []byte, reason string) []byte { return b }

// testEncoder sends audio as binary frames alone, flush and done answers,
// and nothing for the other events.
type testEncoder struct{ id string }

func (e testEncoder) Started(b []byte) []byte { return b }
func (e testEncoder) Audio(b, bin []byte, a *Audio) ([]byte, []byte) {
	return b, append(bin, a.Bytes...)
}
func (e testEncoder) Words(b []byte, _ int, _ string, _ int, _ []synth.Word) []byte { return b }
func (e testEncoder) SentenceDone(b []byte, _ int, _ string, _ float64) []byte      { return b }
func (e testEncoder) Flushed(b []byte, id string) []byte {
	return append(b, `{"flushed":"`+id+`","context":"`+e.id+`"}`...)
}
func (e testEncoder) Done(b []byte, d *Done) []byte {
	return append(b, `{"done":"`+e.id+`"}`...)
}
func (e testEncoder) Cancelled(b []byte, _ *Cancelled) []byte { return b }
func (e testEncoder) Failed(b []byte, code string, _, _ int, _ string) []byte {
	return append(b, `{"failed":"`+code+`"}`...)
}

// countingBilling records what a session charged and refunded.
type countingBilling struct {
	mu               sync.Mutex
	charged, refunds int64
}

func (b *countingBilling) Charge(_ context.Context, n int64) (control.Charge, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.charged += n
	return control.Charge{WorkspaceID: "w", Month: "2026-11", Day: "2026-11-27", FromAllowance: n}, nil
}

func (b *countingBilling) Refund(_ context.Context, c control.Charge) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refunds += c.FromAllowance + c.FromCredits
	return nil
}

func (b *countingBilling) billed() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.charged - b.refunds
}

// wireClient drives a session over a pipe and records what it reads: text
// messages in order, with the audio bytes received before each.
type wireClient struct {
	c   net.Conn
	ran chan error
}

type wireEvent struct {
	text  string // "" for a binary frame
	audio int    // binary bytes
	close bool
}

func serveWire(t *testing.T, w Wire, rtf float64, bill Billing) *wireClient {
	t.Helper()
	server, client := net.Pipe()
	deps := Deps{Engine: reference.New(reference.Options{RTF: rtf}), Voice: lookupVoice, Wire: w, Billing: bill}
	wc := &wireClient{c: client, ran: make(chan error, 1)}
	go func() { wc.ran <- NewOver(&pipeTransport{c: server}, Config{}, deps).Run(context.Background()) }()
	t.Cleanup(func() { client.Close() })
	return wc
}

func (wc *wireClient) send(t *testing.T, m testMsg) {
	t.Helper()
	b, _ := json.Marshal(m)
	wc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if err := wsutil.WriteClientText(wc.c, b); err != nil {
		t.Fatal(err)
	}
}

func (wc *wireClient) next(t *testing.T) wireEvent {
	t.Helper()
	wc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		h, err := ws.ReadHeader(wc.c)
		if err != nil {
			t.Fatalf("reading: %v", err)
		}
		p := make([]byte, h.Length)
		if _, err := io.ReadFull(wc.c, p); err != nil {
			t.Fatal(err)
		}
		switch h.OpCode {
		case ws.OpBinary:
			return wireEvent{audio: len(p)}
		case ws.OpText:
			return wireEvent{text: string(p)}
		case ws.OpClose:
			return wireEvent{close: true}
		}
	}
}

// until reads until a text message containing want, and returns the audio
// bytes before it.
func (wc *wireClient) until(t *testing.T, want string) (audio int, texts []string) {
	t.Helper()
	for {
		ev := wc.next(t)
		switch {
		case ev.close:
			t.Fatalf("closed before %s (texts %v)", want, texts)
		case ev.text == "":
			audio += ev.audio
		default:
			texts = append(texts, ev.text)
			if strings.Contains(ev.text, want) {
				return audio, texts
			}
		}
	}
}

// TestWireFlushClearClose: over a Wire of its own, the session greets,
// sends binary audio alone, answers a flush after that text's audio, holds
// text until the flush when the buffer says so, clears with no audio after
// the answer (and bills only what was spoken), and ends after the open
// contexts' audio when the client closes.
func TestWireFlushClearClose(t *testing.T) {
	const text = "Hello there. This is held."
	cases := []struct {
		name   string
		buffer Buffer
	}{
		{"sentences", Buffer{}},
		{"hold", Buffer{Hold: true, IdleFlush: -1}},
		{"immediate", Buffer{Immediate: true}},
		{"schedule", Buffer{Schedule: []int{5, 10}, IdleFlush: -1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bill := &countingBilling{}
			wc := serveWire(t, &testWire{buffer: tc.buffer}, 0.5, bill) // paced: the clear comes mid-text
			if ev := wc.next(t); ev.text != `{"hello":true}` {
				t.Fatalf("first message %+v, want the greeting", ev)
			}
			wc.send(t, testMsg{Op: "speak", Context: "a", Text: text})
			wc.send(t, testMsg{Op: "flush", Context: "a", ID: "1"})
			audio, texts := wc.until(t, `"flushed":"1"`)
			// 16 kHz s16le: every character but spaces is 60 ms.
			want := int(refDuration(text)*16000+0.5) * 2
			if d := audio - want; d < -64 || d > 64 || len(texts) != 1 {
				t.Fatalf("before flushed: %d audio bytes (want %d), texts %v", audio, want, texts)
			}

			// Clear: a long text is cut off; nothing of it after the answer.
			wc.send(t, testMsg{Op: "speak", Context: "a", Text: strings.Repeat("Spoken for a long while. ", 40)})
			wc.send(t, testMsg{Op: "flush", Context: "a", ID: "2"})
			wc.send(t, testMsg{Op: "clear"})
			wc.until(t, `"cleared":1`)
			// The same context opens again and speaks; a graceful close
			// ends the session after its audio.
			wc.send(t, testMsg{Op: "speak", Context: "a", Text: "Again.", Done: true})
			wc.send(t, testMsg{Op: "close"})
			after := 0
			var texts2 []string
			for ev := wc.next(t); !ev.close; ev = wc.next(t) {
				after += ev.audio
				if ev.text != "" {
					texts2 = append(texts2, ev.text)
				}
			}
			if want := int(refDuration("Again.")*16000+0.5) * 2; after < want-64 || after > want+64 {
				t.Fatalf("after clear: %d audio bytes, want %d (texts %v)", after, want, texts2)
			}
			if strings.Contains(strings.Join(texts2, " "), "flushed") {
				t.Fatalf("a flush of a cleared context was answered: %v", texts2)
			}
			select {
			case <-wc.ran:
			case <-time.After(5 * time.Second):
				t.Fatal("session did not end")
			}
			if b := bill.billed(); b < int64(len(text)+len("Again.")) || b > int64(len(text)+len("Again.")+3*25) {
				t.Fatalf("billed %d characters: the cleared text was not refunded", b)
			}
		})
	}
}

// TestWireHoldSpeaksNothingBeforeFlush: a held buffer keeps whole
// sentences until the flush.
func TestWireHoldSpeaksNothingBeforeFlush(t *testing.T) {
	wc := serveWire(t, &testWire{buffer: Buffer{Hold: true, IdleFlush: -1}}, 0, nil)
	wc.next(t) // greeting
	wc.send(t, testMsg{Op: "speak", Context: "a", Text: "One. Two. Three."})
	wc.send(t, testMsg{Op: "flush", Context: "b", ID: "nothing-open"})
	// A flush of a context that is not open is answered at once; had the
	// held text been spoken, its audio would come first.
	audio, _ := wc.until(t, `"flushed":"nothing-open"`)
	if audio != 0 {
		t.Fatalf("%d audio bytes before any flush of a held context", audio)
	}
	wc.send(t, testMsg{Op: "flush", Context: "a", ID: "x"})
	if audio, _ := wc.until(t, `"flushed":"x"`); audio == 0 {
		t.Fatal("no audio before the flush's answer")
	}
}

// TestLastWordEnd: a schedule's piece ends after the last whole word.
func TestLastWordEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"", 0}, {"word", 0}, {"two words", 4}, {"ends with space ", 16}, {"a  b", 2}, {" lead", 0},
	} {
		if got := lastWordEnd(tc.in); got != tc.want {
			t.Errorf("lastWordEnd(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}
