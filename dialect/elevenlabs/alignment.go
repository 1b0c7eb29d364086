package elevenlabs

import (
	"strconv"
	"unicode/utf8"

	"voicesvc/jsonw"
	"voicesvc/synth"
)

// The vendor's character alignment, made from voicesvc's word timings
// (synth.Word): every code point of the text is one character; the
// characters of a word share the word's span evenly, and the characters
// between two words (spaces, punctuation) share the gap between the first
// word's end and the next one's start. So the characters joined give back
// the text sent, and the times never go back.

// charTime is one character's span, seconds from the start of the audio.
type charTime struct {
	r          rune
	start, end float64
}

// aligner follows one text. Words come in order (a WordClock's); pending
// holds the characters not yet taken. Not safe for concurrent use.
type aligner struct {
	text    string
	at      int     // byte offset in text of the next character to place
	atChar  int     // its code-point offset
	last    float64 // where the characters placed so far end
	pending []charTime
}

func newAligner(text string) *aligner { return &aligner{text: text} }

// word places the characters up to the word's end: the gap before it, then
// the word. A word that starts before the characters already placed (it
// cannot, from a WordClock) is clipped to them.
func (a *aligner) word(w synth.Word) {
	start := max(w.StartS, a.last)
	a.spread(w.CharStart, start)
	a.spread(w.CharEnd, max(w.EndS, start))
}

// finish places the rest of the text up to end (the audio's duration).
func (a *aligner) finish(end float64) {
	a.spread(utf8.RuneCountInString(a.text), max(end, a.last))
}

// spread places the characters up to code point upTo evenly from a.last to
// end (not before a.last). With none to place, the time up to end is
// silence: the next characters start there.
func (a *aligner) spread(upTo int, end float64) {
	n := upTo - a.atChar
	if n <= 0 {
		a.last = max(a.last, end)
		return
	}
	from := a.last
	step := (end - from) / float64(n)
	for i := 0; i < n && a.at < len(a.text); i++ {
		r, size := utf8.DecodeRuneInString(a.text[a.at:])
		a.at += size
		a.atChar++
		s := from + float64(i)*step
		a.pending = append(a.pending, charTime{r: r, start: s, end: s + step})
	}
	a.last = end
}

// take returns the characters placed since the last take; the slice is
// reused by the next call.
func (a *aligner) take() []charTime {
	p := a.pending
	a.pending = a.pending[:0]
	return p
}

// appendAlignmentSeconds writes the HTTP endpoints' alignment object:
// {"characters":[...],"character_start_times_seconds":[...],"character_end_times_seconds":[...]}.
func appendAlignmentSeconds(b []byte, cs []charTime) []byte {
	b = append(b, `{"characters":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendRune(b, c.r)
	}
	b = append(b, `],"character_start_times_seconds":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeconds(b, c.start)
	}
	b = append(b, `],"character_end_times_seconds":[`...)
	for i, c := range cs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendSeconds(b, c.end)
	}
	return append(b, "]}"...)
}

// appendSeconds writes s to the millisecond (rounding is monotonic, so
// times that never go back still do not after it).
func appendSeconds(b []byte, s float64) []byte {
	return strconv.AppendFloat(b, s, 'f', 3, 64)
}

// appendRune writes one character as a JSON string.
func appendRune(b []byte, r rune) []byte {
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	return jsonw.AppendString(b, string(buf[:n]))
}
