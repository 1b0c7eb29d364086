package elevenlabs

import (
	"encoding/base64"
	"math"
	"strconv"
	"sync"

	"voicesvc/jsonw"
	"voicesvc/sessions"
	"voicesvc/synth"
)

// encoder writes one context's server messages:
//
//	{"audio":"<base64>","isFinal":false,"alignment":{...},"normalizedAlignment":{...},"contextId":"c1"}
//	{"audio":null,"isFinal":true,"contextId":"c1"}          the context ended (done or stopped)
//	{"error":"<code>","message":"...","contextId":"c1"}     it failed
//
// contextId only on multi-stream-input. alignment is {"chars",
// "charStartTimesMs", "charDurationsMs"}: the characters of each sentence
// placed by its words (alignment.go), in ms from the start of the
// context's audio; a character goes with the first audio message after
// its word started, the characters after a sentence's last word with the
// next message. voicesvc does not normalize text: normalizedAlignment is
// alignment. Nothing is sent for started, sentence done and flushed.
type encoder struct {
	id         []byte // the contextId member, "" on stream-input
	timestamps bool

	mu       sync.Mutex // Audio and Words (the runner) against Done and Cancelled
	clock    float64    // seconds of audio written
	sentence int
	al       *aligner // the current sentence's
	carry    []charTime
}

func newEncoder(c *sessions.ContextInfo, multi bool) *encoder {
	e := &encoder{timestamps: c.Timestamps, sentence: -1}
	if multi {
		e.id = appendJSONString(append([]byte(nil), `,"contextId":`...), c.ID)
	}
	return e
}

var _ sessions.Encoder = (*encoder)(nil)

func (e *encoder) Started(b []byte) []byte { return b }

func (e *encoder) Audio(b, bin []byte, a *sessions.Audio) ([]byte, []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	b = append(b, `{"audio":"`...)
	b = base64.StdEncoding.AppendEncode(b, a.Bytes)
	b = append(b, `","isFinal":false`...)
	b = e.appendAlignment(b)
	b = append(append(b, e.id...), '}')
	e.clock += a.Duration
	return b, bin
}

// Words places the sentence's characters up to its words; a new sentence
// first ends the last one's (its trailing characters up to the audio
// written so far).
func (e *encoder) Words(b []byte, sentence int, text string, at int, words []synth.Word) []byte {
	if !e.timestamps {
		return b
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if sentence != e.sentence {
		e.endSentence()
		e.sentence, e.al = sentence, newAligner(text)
		e.al.last = e.clock
	}
	for _, w := range words {
		w.CharStart -= at
		w.CharEnd -= at
		e.al.word(w)
	}
	return b
}

// endSentence places the rest of the current sentence up to the audio
// written so far and keeps it for the next message.
func (e *encoder) endSentence() {
	if e.al == nil {
		return
	}
	e.al.finish(e.clock)
	e.carry = append(e.carry, e.al.take()...)
	e.al = nil
}

func (e *encoder) SentenceDone(b []byte, _ int, _ string, _ float64) []byte { return b }
func (e *encoder) Flushed(b []byte, _ string) []byte                        { return b }

func (e *encoder) Done(b []byte, _ *sessions.Done) []byte { return e.final(b) }

func (e *encoder) Cancelled(b []byte, _ *sessions.Cancelled) []byte { return e.final(b) }

// final is the context's last message, with the characters not yet sent.
func (e *encoder) final(b []byte) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endSentence()
	b = append(b, `{"audio":null,"isFinal":true`...)
	b = e.appendAlignment(b)
	return append(append(b, e.id...), '}')
}

func (e *encoder) Failed(b []byte, code string, _ int, _ int, _ string) []byte {
	b = append(b, `{"error":`...)
	b = appendJSONString(b, code)
	b = append(b, `,"message":"the synthesis failed"`...)
	return append(append(b, e.id...), '}')
}

// appendAlignment writes the characters placed since the last message, if
// any, as alignment and normalizedAlignment.
func (e *encoder) appendAlignment(b []byte) []byte {
	cs := e.carry
	if e.al != nil {
		cs = append(cs, e.al.take()...)
	}
	e.carry = cs[:0]
	if len(cs) == 0 {
		return b
	}
	b = append(b, `,"alignment":`...)
	start := len(b)
	b = appendAlignmentMS(b, cs)
	al := b[start:]
	b = append(b, `,"normalizedAlignment":`...)
	return append(b, al...)
}

// appendAlignmentMS writes {"chars","charStartTimesMs","charDurationsMs"}
// in whole milliseconds (a duration is the difference of the rounded ends,
// so starts plus durations never go back).
func appendAlignmentMS(b []byte, cs []charTime) []byte {
	b = append(b, `{"chars":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRune(b, c.r)
	}
	b = append(b, `],"charStartTimesMs":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, ms(c.start), 10)
	}
	b = append(b, `],"charDurationsMs":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, max(ms(c.end)-ms(c.start), 0), 10)
	}
	return append(b, "]}"...)
}

func ms(s float64) int64 { return int64(math.Round(s * 1000)) }

func appendJSONString(b []byte, s string) []byte { return jsonw.AppendString(b, s) }
