package synth

import (
	"context"
	"strconv"
	"unicode/utf8"

	"voicesvc/engine"
	"voicesvc/jsonw"
)

// Word is one spoken word as clients get it (docs/api.md#word-timestamps):
// seconds on the audio's own clock from the start of the stream's (or the
// context's) audio, and code-point offsets into the text the client sent,
// so that slicing that text at [CharStart, CharEnd) gives Word.
type Word struct {
	Word      string
	StartS    float64
	EndS      float64
	CharStart int
	CharEnd   int
}

// WordClock turns an engine's word events into Words. Events carry byte
// offsets into the request's text and sample positions at the engine's
// native rate; time does not change when the audio is resampled, so a
// word's start is its sample over the native rate, whatever the output rate.
//
// A word must reach the client before the audio holding its start, and its
// end must not pass the next word's start: a word's end is the next word's
// start when that is in the same chunk, else the end of the chunk that
// carried it (the audio known to hold the word when it is sent).
//
// One clock serves one request text: a stream's whole text (SSE, the
// engine's offsets then span it all), or one sentence of a realtime
// context (Reset moves it to the next sentence).
type WordClock struct {
	rate      int
	text      string        // the request text the events point into
	spans     []engine.Span // its words
	sentEnds  []int         // byte offset where each sentence of text ends
	next      int           // spans before it were sent
	charBase  int           // code points of the client's text before text
	timeBase  float64       // seconds of audio before this request's
	byteAt    int           // text[:byteAt] holds charAt code points (a cursor)
	charAt    int
	words     []Word // reused between calls
	sampleEnd int    // samples of this request's audio so far
}

// NewWordClock starts a clock for text, rendered at rate samples a second.
func NewWordClock(rate int, text string) *WordClock {
	c := &WordClock{rate: rate}
	c.Reset(text, 0, 0)
	return c
}

// Reset points the clock at the next request text, which starts at code
// point charBase of the client's text and timeBase seconds into the audio.
func (c *WordClock) Reset(text string, charBase int, timeBase float64) {
	*c = WordClock{rate: c.rate, text: text, spans: engine.Words(text), charBase: charBase,
		timeBase: timeBase, words: c.words[:0], sentEnds: c.sentEnds[:0]}
	for _, sp := range engine.Sentences(text) {
		c.sentEnds = append(c.sentEnds, sp.End)
	}
}

// Chunk returns the words whose start is in ch, in order, each once. A
// word is a whitespace-separated word of the text without its leading and
// trailing punctuation (engine.Words): an engine event names the word it
// falls in, so an engine that reports a word in parts ("didn" of
// "didn't") or twice (espeak-ng speaks "$5" as two words) or reports
// punctuation still gives each word once.
//
// An engine may also run words together without an event each (espeak-ng
// says "as it is spoken" with events for "as" and "spoken" only). Words it
// skipped are placed between the chunk's start (or the last word's start,
// if later) and the next reported word, by their length; words still
// unreported when their sentence's last chunk comes are placed up to its
// end. So every word comes once and before the audio holding its start.
// The slice is reused by the next call.
func (c *WordClock) Chunk(ch engine.Chunk) []Word {
	from := c.timeBase + float64(c.sampleEnd)/float64(c.rate) // this chunk's start
	c.sampleEnd += len(ch.Samples)
	c.words = c.words[:0]
	for _, ev := range ch.Words {
		i := c.find(ev)
		if i < 0 {
			continue
		}
		s := c.timeBase + float64(ev.Sample)/float64(c.rate)
		c.skipped(i, from, s)
		c.add(i, s)
		c.next = i + 1
	}
	if ch.Last && ch.Sentence < len(c.sentEnds) {
		end := c.next
		for end < len(c.spans) && c.spans[end].Start < c.sentEnds[ch.Sentence] {
			end++
		}
		c.skipped(end, from, c.timeBase+float64(c.sampleEnd)/float64(c.rate))
		c.next = end
	}
	return c.words
}

// skipped places the unreported words before word i between from (or the
// last word's start) and to, by their length in code points.
func (c *WordClock) skipped(i int, from, to float64) {
	if i <= c.next {
		return
	}
	if n := len(c.words); n > 0 {
		from = max(from, c.words[n-1].StartS)
	}
	to = max(to, from)
	total := 0
	for k := c.next; k < i; k++ {
		total += utf8.RuneCountInString(c.spans[k].Text) + 1
	}
	at := 0
	for k := c.next; k < i; k++ {
		c.add(k, from+(to-from)*float64(at)/float64(total))
		at += utf8.RuneCountInString(c.spans[k].Text) + 1
	}
}

// add appends word k starting at s; the previous word ends there.
func (c *WordClock) add(k int, s float64) {
	if n := len(c.words); n > 0 {
		c.words[n-1].EndS = max(c.words[n-1].StartS, min(c.words[n-1].EndS, s))
	}
	start, end := c.spans[k].Start, c.spans[k].End
	cs := c.chars(start)
	ce := cs + utf8.RuneCountInString(c.text[start:end])
	c.words = append(c.words, Word{Word: c.text[start:end], StartS: s,
		EndS: c.timeBase + float64(c.sampleEnd)/float64(c.rate), CharStart: cs, CharEnd: ce})
}

// find returns the index of the first word not yet sent that the event
// touches, or -1: the event is punctuation, past the text, or a word that
// was sent already.
func (c *WordClock) find(ev engine.WordEvent) int {
	lo, hi := ev.TextOffset, ev.TextOffset+max(ev.TextLength, 1)
	for i := c.next; i < len(c.spans); i++ {
		sp := c.spans[i]
		if sp.Start >= hi {
			return -1
		}
		if sp.End > lo {
			return i
		}
	}
	return -1
}

// chars converts a byte offset into a code-point offset of the client's
// text. Words come in order, so the cursor only moves forward.
func (c *WordClock) chars(off int) int {
	if off < c.byteAt {
		c.byteAt, c.charAt = 0, 0
	}
	c.charAt += utf8.RuneCountInString(c.text[c.byteAt:off])
	c.byteAt = off
	return c.charBase + c.charAt
}

// Tap returns eng with before called on each chunk ahead of the consumer,
// so that the words a chunk starts are sent before its audio.
func Tap(eng engine.Engine, before func(engine.Chunk) error) engine.Engine {
	return tapped{eng, before}
}

type tapped struct {
	engine.Engine
	before func(engine.Chunk) error
}

func (e tapped) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	return e.Engine.Synthesize(ctx, req, func(c engine.Chunk) error {
		if err := e.before(c); err != nil {
			return err
		}
		return emit(c)
	})
}

// AppendWords appends the JSON array of words.
func AppendWords(b []byte, words []Word) []byte {
	b = append(b, '[')
	for i, w := range words {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"word":`...)
		b = jsonw.AppendString(b, w.Word)
		b = append(b, `,"start_s":`...)
		b = strconv.AppendFloat(b, round6(w.StartS), 'f', -1, 64)
		b = append(b, `,"end_s":`...)
		b = strconv.AppendFloat(b, round6(w.EndS), 'f', -1, 64)
		b = append(b, `,"char_start":`...)
		b = strconv.AppendInt(b, int64(w.CharStart), 10)
		b = append(b, `,"char_end":`...)
		b = strconv.AppendInt(b, int64(w.CharEnd), 10)
		b = append(b, '}')
	}
	return append(b, ']')
}

// round6 keeps microseconds: enough for any sample rate, short on the wire.
func round6(v float64) float64 {
	return float64(int64(v*1e6+0.5)) / 1e6
}
