package sessions

import (
	"voicesvc/synth"
)

// What a listener heard, for the cancel receipt (docs/realtime.md#task_cancelled):
// task_cancelled says how much of the context's audio went to the socket
// before the cancel took effect (audio_sent_s) and the code point of its
// text up to which every word had all its audio sent (spoken_until), so a
// client that plays audio as it arrives knows where the listener stopped
// hearing, e.g. to tell a language model what was actually said.

// heardWord is a word of the context's audio: where it starts and ends,
// and where it ends in the context's text. A word ends where the next word
// of its sentence starts, or with its sentence's audio.
type heardWord struct {
	startS, endS float64
	ended        bool
	charEnd      int
	sentence     int
}

// maxHeard bounds the words a context remembers: past it the words already
// wholly sent are folded into spokenBase.
const maxHeard = 1024

// receipt is the cancel receipt's content.
type receipt struct {
	audioSent   float64
	spokenUntil int
}

// heardWords records the words a chunk starts and, when the client asked
// for them, queues their word_timestamps frame ahead of the chunk's audio.
// It runs on the runner, between the engine and the codec.
func (t *task) heardWords(sentence int, text string, at int, words []synth.Word) error {
	if len(words) == 0 {
		return nil
	}
	s := t.s
	s.mu.Lock()
	for _, w := range words {
		if n := len(t.heard); n > 0 && t.heard[n-1].sentence == sentence {
			t.heard[n-1].endS, t.heard[n-1].ended = w.StartS, true
		}
		t.heard = append(t.heard, heardWord{startS: w.StartS, charEnd: w.CharEnd, sentence: sentence})
	}
	if len(t.heard) > maxHeard {
		t.foldHeardLocked()
	}
	s.mu.Unlock()
	if !t.timestamps {
		return nil
	}
	f := getFrame()
	f.task = t
	f.hdr = t.enc.Words(f.hdr, sentence, text, at, words)
	if len(f.hdr) == 0 {
		// The protocol has no message for words (ElevenLabs sends them
		// with the audio): nothing to queue, and no writer to wake ahead
		// of the chunk's audio.
		putFrame(f)
		return nil
	}
	return s.pushAudio(t, f)
}

// sentenceEndedLocked: the sentence's audio ends at endS, and so does its
// last word.
func (t *task) sentenceEndedLocked(sentence int, endS float64) {
	if n := len(t.heard); n > 0 && t.heard[n-1].sentence == sentence && !t.heard[n-1].ended {
		t.heard[n-1].endS, t.heard[n-1].ended = endS, true
	}
}

// sentLocked is how many of the heard words had all their audio sent.
func (t *task) sentLocked() int {
	const eps = 1e-9 // durations are sums of chunk durations
	k := 0
	for k < len(t.heard) && t.heard[k].ended && t.heard[k].endS <= t.sentS+eps {
		k++
	}
	return k
}

// foldHeardLocked forgets the words wholly sent, keeping where they end.
func (t *task) foldHeardLocked() {
	if k := t.sentLocked(); k > 0 {
		t.spokenBase = t.heard[k-1].charEnd
		t.heard = append(t.heard[:0], t.heard[k:]...)
	}
}

func (t *task) receiptLocked() receipt {
	r := receipt{audioSent: t.sentS, spokenUntil: t.spokenBase}
	if k := t.sentLocked(); k > 0 {
		r.spokenUntil = t.heard[k-1].charEnd
	}
	return r
}
