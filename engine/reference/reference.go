// Package reference is a deterministic stand-in speech engine: a sine tone
// whose length follows the text. It costs next to nothing to run (the tone
// is advanced by a phase rotation, not a math.Sin per sample), so tests of
// the layers above (transports, codecs, the pool) can exercise streaming,
// pacing and cancellation without espeak-ng, and get audio they can predict;
// and the benchmark can use it to measure the gateway alone.
//
// When paced (Options.RTF > 0), each chunk is emitted at its start time:
// the first at once, chunk k at k × chunk duration × RTF. So the engine
// adds no delay before the first audio, and time to first byte measured
// with it is the gateway's own.
package reference

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"voicesvc/engine"
)

// Defaults of the rendered tone.
const (
	Rate          = 24000 // native sample rate
	DefaultFreq   = 220.0 // Hz
	Amplitude     = 0.3
	PerCharacter  = 60 * time.Millisecond // per non-space character
	DefaultChunk  = 20 * time.Millisecond
	profileFormat = 1
)

// Options configure the engine. The zero value renders as fast as possible
// in 20 ms chunks.
type Options struct {
	// RTF paces the output: a chunk is released no earlier than RTF times
	// the audio time of its first sample since the start, so the first
	// chunk leaves at once (1 = real time, 0 = no pacing).
	RTF float64
	// Chunk is the audio duration of one chunk (default 20 ms).
	Chunk time.Duration
}

// Engine implements engine.Engine. It is safe for concurrent use.
type Engine struct {
	opts  Options
	tones toneCache
}

var _ engine.Engine = (*Engine)(nil)

// New returns a reference engine. New() uses the zero Options.
func New(opts ...Options) *Engine {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	return &Engine{opts: o}
}

// Profile is the reference engine's voice profile: just the tone.
type Profile struct {
	Version int     `json:"version"`
	Freq    float64 `json:"freq"` // Hz
}

// MarshalProfile serializes a profile with the current version.
func MarshalProfile(freq float64) []byte {
	b, _ := json.Marshal(Profile{Version: profileFormat, Freq: freq})
	return b
}

func (e *Engine) Name() string    { return "reference" }
func (e *Engine) NativeRate() int { return Rate }

// WordTimes: the reference engine places every word of its text.
func (e *Engine) WordTimes() bool { return true }

func (e *Engine) Languages() []string { return []string{"en", "hi"} }

func (e *Engine) Catalog() []engine.CatalogVoice {
	return []engine.CatalogVoice{
		{Alias: "ref-en-low", Name: "Reference Low", Language: "en",
			Labels:  map[string]string{"gender": "male", "accent": "american", "age": "middle_aged", "use_case": "testing"},
			Profile: MarshalProfile(220)},
		{Alias: "ref-en-high", Name: "Reference High", Language: "en",
			Labels:  map[string]string{"gender": "female", "accent": "british", "age": "young", "use_case": "testing"},
			Profile: MarshalProfile(330)},
		{Alias: "ref-hi", Name: "Reference Hindi", Language: "hi",
			Labels:  map[string]string{"gender": "female", "accent": "indian", "age": "middle_aged", "use_case": "testing"},
			Profile: MarshalProfile(275)},
	}
}

// Enroll accepts any clip with at least 0.5 s of non-silent audio and
// returns a profile whose tone is fixed (the clip does not shape it).
func (e *Engine) Enroll(ctx context.Context, clip engine.Clip) ([]byte, error) {
	if clip.Rate <= 0 || len(clip.Samples) < clip.Rate/2 {
		return nil, fmt.Errorf("%w: clip shorter than 0.5 s", engine.ErrClipUnusable)
	}
	var sum float64
	for _, s := range clip.Samples {
		sum += float64(s) * float64(s)
	}
	if math.Sqrt(sum/float64(len(clip.Samples))) < 1e-3 {
		return nil, fmt.Errorf("%w: clip is silent", engine.ErrClipUnusable)
	}
	return MarshalProfile(DefaultFreq), nil
}

// Synthesize renders each sentence of req.Text as a tone of
// PerCharacter / Speed per non-space character (so speed is exact by
// construction, word starts included; clamped to engine.MinSpeed-MaxSpeed); Pitch shifts the tone in
// semitones, Volume scales it. Word events are spread over the sentence in
// proportion to the characters before each word.
func (e *Engine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	lang := strings.ToLower(req.Language)
	if lang != "" && lang != "en" && !strings.HasPrefix(lang, "en-") && lang != "hi" && !strings.HasPrefix(lang, "hi-") {
		return fmt.Errorf("%w: language %q not supported", engine.ErrInvalidInput, req.Language)
	}
	freq := DefaultFreq
	if len(req.Profile) > 0 {
		var p Profile
		if err := json.Unmarshal(req.Profile, &p); err != nil || p.Freq <= 0 {
			return fmt.Errorf("%w: bad reference profile", engine.ErrInvalidInput)
		}
		freq = p.Freq
	}
	freq *= math.Pow(2, req.Params.Pitch/12)
	amp := Amplitude
	if req.Params.Volume > 0 {
		amp *= req.Params.Volume
	}
	speed := req.Params.Speed
	if speed <= 0 {
		speed = 1
	}
	speed = min(max(speed, engine.MinSpeed), engine.MaxSpeed)
	sents := engine.Sentences(req.Text)
	if len(sents) == 0 {
		return fmt.Errorf("%w: no text to speak", engine.ErrInvalidInput)
	}
	p := pacer{start: time.Now(), rtf: e.opts.RTF}
	chunk := int(e.opts.Chunk.Seconds() * Rate)
	wordIndex, total := 0, 0
	for si, s := range sents {
		n, words := sentenceLayout(s, speed)
		for off := 0; off < n; off += chunk {
			if err := ctx.Err(); err != nil {
				return err
			}
			end := min(off+chunk, n)
			// fill writes every sample, so a recycled buffer needs no clearing.
			c := engine.Chunk{Sentence: si, Last: end == n, Samples: engine.SampleBuffer(end - off)}
			e.tones.fill(c.Samples, amp, freq, off)
			for _, w := range words {
				if w.Sample >= off && w.Sample < end || w.Sample == n && end == n {
					w.Index = wordIndex
					w.Sample += total
					wordIndex++
					c.Words = append(c.Words, w)
				}
			}
			if err := p.wait(ctx, total+off); err != nil {
				return err
			}
			if err := emit(c); err != nil {
				return err
			}
		}
		total += n
	}
	return nil
}

// toneResync bounds how many samples tone advances by rotation before it
// recomputes the phase exactly, so rounding error cannot build up whatever
// the chunk size. Blocks are aligned to the sentence's start, so a sample's
// value does not depend on how the sentence was cut into chunks.
const toneResync = 1024

// tone writes amp·sin(2π·freq·t) for t = (off+i)/Rate into dst: the tone of
// a sentence, from its sample off. It computes the sine and cosine exactly
// at the start of every toneResync block of the sentence and rotates the
// phase in between (error far below float32 resolution), so the output is
// the same on every run and matches math.Sin per sample to within about
// 1e-7, and tone(dst, off) equals samples [off, off+len(dst)) of the whole
// sentence's tone bit for bit (toneCache relies on that).
func tone(dst []float32, amp, freq float64, off int) {
	w := 2 * math.Pi * freq / Rate
	ds, dc := math.Sincos(w)
	end := off + len(dst) // sentence positions [off, end)
	for block := off - off%toneResync; block < end; block += toneResync {
		s, c := math.Sincos(w * float64(block))
		for j := block; j < min(block+toneResync, end); j++ {
			if j >= off {
				dst[j-off] = float32(amp * s)
			}
			s, c = s*dc+c*ds, c*dc-s*ds
		}
	}
}

// toneCache keeps whole-sentence tones, so that a chunk is a copy rather
// than a computation: this engine stands in for a free one, and its own
// cost should not show in the gateway's profile. Bounded: a few tones
// (voice and pitch) of at most toneCacheSamples each; anything else is
// computed, to the same samples.
type toneCache struct {
	mu     sync.Mutex
	tables map[[2]float64][]float32 // {amp, freq} -> the tone from sample 0
}

const (
	toneCacheTones   = 8
	toneCacheSamples = 20 * Rate
)

// fill writes the sentence tone's samples [off, off+len(dst)) into dst.
func (c *toneCache) fill(dst []float32, amp, freq float64, off int) {
	n := off + len(dst)
	key := [2]float64{amp, freq}
	c.mu.Lock()
	t := c.tables[key]
	if len(t) < n && n <= toneCacheSamples && (t != nil || len(c.tables) < toneCacheTones) {
		t = make([]float32, min(max(n, 2*len(t), Rate), toneCacheSamples))
		tone(t, amp, freq, 0)
		if c.tables == nil {
			c.tables = map[[2]float64][]float32{}
		}
		c.tables[key] = t
	}
	c.mu.Unlock()
	if len(t) >= n {
		copy(dst, t[off:n])
		return
	}
	tone(dst, amp, freq, off)
}

// sentenceLayout returns the sentence's length in samples and its word
// events with offsets into the request text and samples within the sentence.
func sentenceLayout(s engine.Span, speed float64) (int, []engine.WordEvent) {
	perChar := PerCharacter.Seconds() * Rate / speed
	chars := func(t string) int { return utf8.RuneCountInString(strings.Join(strings.Fields(t), "")) }
	n := int(math.Round(float64(chars(s.Text)) * perChar))
	var words []engine.WordEvent
	for _, w := range engine.Words(s.Text) {
		words = append(words, engine.WordEvent{
			TextOffset: s.Start + w.Start,
			TextLength: w.End - w.Start,
			Sample:     int(math.Round(float64(chars(s.Text[:w.Start])) * perChar)),
		})
	}
	return n, words
}

// pacer holds chunks back so the output runs at rtf times real time: wait
// returns when the audio before samples has had its time.
type pacer struct {
	start time.Time
	rtf   float64
}

func (p pacer) wait(ctx context.Context, samples int) error {
	if p.rtf <= 0 {
		return nil
	}
	due := p.start.Add(time.Duration(p.rtf * float64(samples) / Rate * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
