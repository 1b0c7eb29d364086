// Package espeak is the embedded speech engine: libespeak-ng through cgo,
// in synchronous mode with a callback, so audio reaches the caller while a
// sentence is still being rendered.
//
// espeak-ng keeps global state and is not thread-safe, so there is one
// Engine per process and it renders one sentence at a time; the pool in
// package engine gets parallelism from subprocess workers.
//
// Parameters: Speed is an exact multiplier from engine.MinSpeed to MaxSpeed
// (clamped there): espeak-ng speaks at the profile's rate (espeakRATE,
// words per minute, clamped to 80-450) and libsonic time-stretches the
// audio by Speed, word starts with it (stretch.go); Pitch shifts the profile's pitch line by
// semitones (written into the generated variant, so the shift is exact);
// Volume is a gain on the samples (clipped to [-1, 1]); Expressiveness 0-1
// sets espeakRANGE 0-100. NumStep and GuidanceScale change nothing here.
//
// Profiles become variant files in a private mirror of espeak-ng-data
// (symbolic links plus a writable voices/!v), selected as "voice+variant".
// Every generated variant pins flutter (0 unless the profile sets it).
//
// Every sentence starts from the state espeak-ng had right after
// initialization (history.go), so a sentence renders to the same samples
// whatever was rendered before it, in this process or another.
package espeak

/*
#include <espeak-ng/speak_lib.h>
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"voicesvc/engine"
)

const (
	normalRate = 175 // words per minute, espeakRATE_NORMAL
	minRate    = 80
	maxRate    = 450
)

// Engine implements engine.Engine over the process's espeak-ng.
type Engine struct {
	mu        sync.Mutex // one synthesis at a time: espeak-ng is global
	rate      int
	data      *dataDir
	langs     languageTable
	voice     string // voice currently selected in espeak-ng
	closed    bool
	variantOK map[string]bool // generated variants already written
	history   error           // nil when every sentence starts from the same state (history.go)
	eager     bool            // SetEagerFirstChunk
}

// SetEagerFirstChunk decides when a sentence's first buffer is emitted: at
// once (on), or when the next buffer shows it is not the last (off, the
// default). On saves the render of one buffer before the first audio
// (first chunk 0.111 -> 0.075 ms, speak's first byte 0.31 -> 0.27 ms),
// which is worth it where emit is the listener's own path: the engine in
// the gateway's process. In a worker child the chunk then crosses a pipe
// and the pool, and there, at three times capacity, emitting it at once
// cost 2-3% of the audio rendered a second and 1.5 ms of gap p99 at
// capacity (three paired runs), so workers keep it off.
func (e *Engine) SetEagerFirstChunk(on bool) {
	e.mu.Lock()
	e.eager = on
	e.mu.Unlock()
}

var _ engine.Engine = (*Engine)(nil)

var (
	instMu sync.Mutex
	inst   *Engine

	// The history values are those of the process's first initialization:
	// a later espeak_Initialize does not reset them, and every process
	// must start its sentences from the same state.
	historyOnce sync.Once
	historyErr  error
)

// New returns the process's espeak-ng engine, initializing espeak-ng on
// first use. Every call returns the same Engine until Close.
func New() (*Engine, error) {
	instMu.Lock()
	defer instMu.Unlock()
	if inst != nil {
		return inst, nil
	}
	d, err := newDataDir(systemDataPath())
	if err != nil {
		return nil, err
	}
	rate, err := initialize(d.root)
	if err != nil {
		d.remove()
		return nil, err
	}
	inst = &Engine{rate: rate, data: d, langs: newLanguageTable(listVoices()), variantOK: map[string]bool{}}
	historyOnce.Do(func() { historyErr = findHistory() })
	inst.history = historyErr
	return inst, nil
}

// Close releases espeak-ng and the private data directory. A later New
// initializes again.
func (e *Engine) Close() error {
	instMu.Lock()
	defer instMu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	terminate()
	if inst == e {
		inst = nil
	}
	return e.data.remove()
}

// Reproducible reports why a sentence's audio might depend on what the
// process rendered before it; nil when it cannot (history.go).
func (e *Engine) Reproducible() error { return e.history }

func (e *Engine) Name() string        { return "espeak-ng" }
func (e *Engine) NativeRate() int     { return e.rate }
func (e *Engine) Languages() []string { return append([]string(nil), e.langs.tags...) }

// WordTimes: espeak-ng reports every word it speaks (its word events).
func (e *Engine) WordTimes() bool { return true }

// Enroll analyses a reference clip and returns the profile that renders
// its speaker (enroll.go).
func (e *Engine) Enroll(ctx context.Context, clip engine.Clip) ([]byte, error) {
	return e.enroll(ctx, clip)
}

// setup is everything resolved from a request before espeak-ng is touched.
type setup struct {
	voice string // argument of espeak_SetVoiceByName: "en-US+vs0123..."
	rate  int
	speed float64 // time-stretch factor; 0 or 1: none
	rng   int
	gain  float32
}

func (e *Engine) resolve(req engine.Request) (setup, Profile, error) {
	var p Profile
	if len(req.Profile) > 0 {
		var err error
		if p, err = ParseProfile(req.Profile); err != nil {
			return setup{}, p, fmt.Errorf("%w: %v", engine.ErrInvalidInput, err)
		}
	}
	voice := p.Voice
	// The request's language wins over the profile's when it names another
	// language: the profile's tone then speaks with that language's rules.
	lang := req.Language
	if lang == "" {
		lang = p.Language
	}
	if lang == "" && voice == "" {
		lang = "en"
	}
	if voice == "" || (req.Language != "" && primary(req.Language) != primary(p.Language)) {
		v, ok := e.langs.lookup(lang)
		if !ok {
			return setup{}, p, fmt.Errorf("%w: language %q not supported by espeak-ng", engine.ErrInvalidInput, lang)
		}
		voice = v
	}
	s := setup{voice: voice, rate: normalRate, rng: 50, gain: 1}
	if p.Rate > 0 {
		s.rate = p.Rate
	}
	s.rate = min(max(s.rate, minRate), maxRate)
	if sp := req.Params.Speed; sp > 0 {
		s.speed = min(max(sp, engine.MinSpeed), engine.MaxSpeed)
	}
	if p.Range > 0 {
		s.rng = p.Range
	}
	if x := req.Params.Expressiveness; x != nil {
		s.rng = int(math.Round(min(max(*x, 0), 1) * 100))
	}
	if p.Gain > 0 {
		s.gain = float32(p.Gain)
	}
	if req.Params.Volume > 0 {
		s.gain *= float32(req.Params.Volume)
	}
	return s, p, nil
}

// Synthesize renders req sentence by sentence. Holding the engine for the
// whole request keeps the profile's settings in place; the pool gives each
// worker single sentences, so nobody waits for a long text.
func (e *Engine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	sents := engine.Sentences(req.Text)
	if len(sents) == 0 {
		return fmt.Errorf("%w: no text to speak", engine.ErrInvalidInput)
	}
	s, p, err := e.resolve(req)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return fmt.Errorf("%w: espeak-ng engine closed", engine.ErrUnavailable)
	}
	if err := e.selectVoice(s.voice, p, req.Params.Pitch); err != nil {
		return err
	}
	// espeakVOLUME stays at its default (100; Volume is a gain on our
	// side): setting it recomputes wavegen's amplitude without the echo
	// compensation that selecting the voice applied, so a voice with echo
	// would render louder after a request that kept the same voice.
	for _, kv := range [][2]int{{C.espeakRATE, s.rate}, {C.espeakRANGE, s.rng}, {C.espeakPITCH, 50}} {
		if err := setParameter(C.espeak_PARAMETER(kv[0]), kv[1]); err != nil {
			return err
		}
	}
	r := &render{ctx: ctx, emit: emit, gain: s.gain, rate: e.rate, eager: e.eager}
	if st := newStretcher(s.speed, e.rate, emit); st != nil {
		defer st.close()
		r.emit, r.stretch = st.chunk, st
	}
	for i, sent := range sents {
		if err := ctx.Err(); err != nil {
			return err
		}
		r.begin(i, sent)
		current = r
		err := synth(strings.ReplaceAll(sent.Text, ctrlEmbedded, " "))
		current = nil
		if r.err != nil {
			cancelPending()
		}
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return fmt.Errorf("espeak: synthesize: %w", err)
		}
		if err := r.finish(); err != nil {
			return err
		}
	}
	return nil
}

// ctrlEmbedded starts an espeak-ng embedded command in the text ("\x01"
// "150A": volume, "80H": echo, ...). Their effect outlives the text that
// carried them, so one request could change how later ones sound: it is
// replaced by a space, which keeps every character position.
const ctrlEmbedded = "\x01"

// selectVoice makes espeak-ng speak with voice plus a variant realizing
// the profile, writing the variant file the first time it is needed.
func (e *Engine) selectVoice(voice string, p Profile, semitones float64) error {
	stock := ""
	if p.Variant != "" {
		var err error
		if stock, err = e.data.stockVariant(p.Variant); err != nil {
			return fmt.Errorf("%w: %v", engine.ErrInvalidInput, err)
		}
	}
	name := voice
	if content := variantFile(p, stock, semitones); content != "" {
		v := variantName(content)
		if !e.variantOK[v] {
			if err := e.data.writeVariant(v, content); err != nil {
				return err
			}
			e.variantOK[v] = true
		}
		name += "+" + v
	}
	if name == e.voice {
		return nil
	}
	if err := setVoice(name); err != nil {
		e.voice = ""
		return err
	}
	e.voice = name
	return nil
}

// render turns espeak-ng's buffers for one request into chunks. It holds
// one chunk back so that the final one of a sentence can carry Last.
type render struct {
	ctx      context.Context
	emit     func(engine.Chunk) error
	gain     float32
	rate     int
	err      error
	sentence int
	base     int           // text offset of the sentence in the request
	text     string        // the sentence
	runeOff  []int         // byte offset of each character of the sentence
	samples  int           // samples emitted before this sentence
	inSent   int           // samples of this sentence so far
	words    int           // word events so far in the request
	spans    []engine.Span // the sentence's words (engine.Words), offsets in text
	next     int           // spans before it have an event
	prevAt   int           // sample of the sentence's last word event (its start before any)
	prevLen  int           // that word's code points plus one; 0 before any
	bufAt    int           // request sample where espeak-ng's last buffer began
	pending  *engine.Chunk
	emitted  bool // a chunk of this sentence has gone out (stretched: audio has come out)
	eager    bool // the first buffer goes out as it arrives (SetEagerFirstChunk)
	// stretch, when speed is not 1, is what emit feeds (stretch.go). Until
	// the sentence's stretched audio has begun, buffers go to it one by
	// one, so that the first audio waits for no more than sonic needs.
	stretch *stretcher
}

// sent records that a chunk of the sentence went out.
func (r *render) sent() { r.emitted = r.stretch == nil || r.stretch.started() }

func (r *render) begin(i int, s engine.Span) {
	r.samples += r.inSent
	r.sentence, r.base, r.text, r.inSent, r.pending, r.emitted = i, s.Start, s.Text, 0, nil, false
	r.spans, r.next, r.prevAt, r.prevLen, r.bufAt = engine.Words(s.Text), 0, r.samples, 0, r.samples
	r.runeOff = r.runeOff[:0]
	for off := range s.Text {
		r.runeOff = append(r.runeOff, off)
	}
	r.runeOff = append(r.runeOff, len(s.Text))
}

// onAudio is called from the synth callback; true aborts espeak-ng.
func (r *render) onAudio(pcm []int16, events []rawEvent) bool {
	if err := r.ctx.Err(); err != nil {
		r.err = err
		return true
	}
	var words []engine.WordEvent
	at := r.samples + r.inSent // where this buffer's audio begins
	for _, ev := range events {
		// espeak-ng sometimes reports a word on the final punctuation or
		// past the end (nothing of ours to point at): skip it.
		w := r.word(ev)
		off := w.TextOffset - r.base
		if len(engine.Words(r.text[off:][:w.TextLength])) == 0 {
			continue
		}
		i := r.find(off, w.TextLength)
		if i > r.next {
			words = r.runTogether(words, i, min(at, w.Sample), w.Sample)
		}
		if i >= 0 {
			r.next, r.prevAt, r.prevLen = i+1, w.Sample, utf8.RuneCountInString(r.spans[i].Text)+1
		}
		w.Index = r.words
		r.words++
		words = append(words, w)
	}
	if len(pcm) > 0 {
		r.bufAt = at
	}
	if len(pcm) == 0 {
		if r.pending != nil {
			r.pending.Words = append(r.pending.Words, words...)
		} else if len(words) > 0 {
			r.pending = &engine.Chunk{Sentence: r.sentence, Words: words}
		}
		return false
	}
	r.inSent += len(pcm)
	// Buffers after the first are joined into chunks of chunkMs; unless
	// eager, the first goes out when this one shows it was not the last.
	if p := r.pending; p != nil && len(p.Samples) > 0 && (!r.emitted || len(p.Samples) >= r.chunkSamples()) {
		if err := r.emit(*p); err != nil {
			r.err = err
			return true
		}
		r.sent()
		r.pending = nil
	}
	if r.pending == nil {
		size := len(pcm)
		if r.emitted { // a chunk grows to chunkMs plus one buffer at most
			size += r.chunkSamples()
		}
		// Its samples go to the consumer, which may give them back
		// (engine.RecycleSamples) for a later chunk: the worker child does,
		// so it renders without garbage.
		r.pending = &engine.Chunk{Sentence: r.sentence, Samples: engine.SampleBuffer(size)[:0]}
	}
	c := r.pending
	c.Words = append(c.Words, words...)
	n := len(c.Samples)
	c.Samples = slices.Grow(c.Samples, len(pcm))[:n+len(pcm)]
	out := c.Samples[n:]
	// int16/32768 is within [-1, 1) already: only a gain above 1 can clip.
	scale := r.gain / 32768
	if r.gain <= 1 {
		for i, v := range pcm {
			out[i] = float32(v) * scale
		}
	} else {
		for i, v := range pcm {
			out[i] = min(max(float32(v)*scale, -1), 1)
		}
	}
	// Eager: the sentence's first buffer goes out at once, without the
	// render of one more buffer to show it was not the last; a sentence of
	// one buffer then ends with an empty chunk carrying Last (finish).
	if r.eager && !r.emitted {
		r.pending = nil
		if err := r.emit(*c); err != nil {
			r.err = err
			return true
		}
		r.sent()
	}
	return false
}

// chunkMs is the audio a chunk carries after the first of its sentence.
// espeak-ng renders far faster than real time, so joining its 20 ms
// buffers delays nothing a listener hears, while every chunk costs a
// frame on the worker pipe, a resampler call and a write downstream.
const chunkMs = 100

func (r *render) chunkSamples() int { return r.rate * chunkMs / 1000 }

// word maps espeak-ng's character position (1-based, in the sentence) to
// byte offsets in the request text.
func (r *render) word(ev rawEvent) engine.WordEvent {
	n := len(r.runeOff) - 1
	start := min(max(ev.TextPosition-1, 0), n)
	end := min(max(start+ev.Length, start), n)
	return engine.WordEvent{
		TextOffset: r.base + r.runeOff[start],
		TextLength: r.runeOff[end] - r.runeOff[start],
		Sample:     r.samples + ev.AudioMs*r.rate/1000,
	}
}

// find returns the index of the first word of the sentence without an
// event yet that the event's text (offset and length in the sentence)
// touches, or -1 (a word reported again, or in parts).
func (r *render) find(off, length int) int {
	hi := off + max(length, 1)
	for i := r.next; i < len(r.spans); i++ {
		if sp := r.spans[i]; sp.Start >= hi {
			return -1
		} else if sp.End > off {
			return i
		}
	}
	return -1
}

// runTogether gives an event to each word espeak-ng ran into a neighbour
// without one ("a" of "for a very"), the sentence's words from r.next to
// i, which start before sample to (the next word's start, or the
// sentence's end); none may start before lo, the audio not yet emitted.
//
// Their place is decided here, on espeak-ng's own buffers, and not by the
// transport's word clock on the chunks it gets: those begin where the
// stretcher's output happens to (stretch.go), so a word placed by them
// moved against its start at speed 1 over speed, by up to half a second
// at 0.25 (issue 28). espeak-ng renders the same buffers and events
// whatever the speed, so these events are the same too, and the
// stretcher divides them by speed like the rest. They share the time from
// the last word's start to the next one's by length in code points (the
// last word's included); where that would put one before lo, they share
// the time from lo instead.
func (r *render) runTogether(words []engine.WordEvent, i, lo, to int) []engine.WordEvent {
	prev := min(r.prevAt, to)
	total := r.prevLen
	for k := r.next; k < i; k++ {
		total += utf8.RuneCountInString(r.spans[k].Text) + 1
	}
	from, skip := prev, 0 // place word k at from + (to-from)*(at+skip)/(total)
	if prev+int(float64(to-prev)*float64(r.prevLen)/float64(total)) < lo {
		from, skip = max(prev, lo), -r.prevLen
		total -= r.prevLen
	}
	at := r.prevLen
	for k := r.next; k < i; k++ {
		sp := r.spans[k]
		words = append(words, engine.WordEvent{
			Index:      r.words,
			TextOffset: r.base + sp.Start,
			TextLength: sp.End - sp.Start,
			Sample:     from + int(math.Round(float64(to-from)*float64(at+skip)/float64(total))),
		})
		r.words++
		at += utf8.RuneCountInString(sp.Text) + 1
	}
	r.next = i
	return words
}

// finish emits the held-back chunk as the sentence's last.
func (r *render) finish() error {
	c := r.pending
	if c == nil {
		c = &engine.Chunk{Sentence: r.sentence}
	}
	if r.next < len(r.spans) {
		// Words still without an event end up to the sentence's end,
		// within its last buffer (all of it, unstretched, when it went
		// out already).
		end := r.samples + r.inSent
		lo := r.bufAt
		if r.stretch == nil && len(c.Samples) == 0 {
			lo = end
		}
		c.Words = r.runTogether(c.Words, len(r.spans), min(lo, end), end)
	}
	r.pending = nil
	c.Last = true
	return r.emit(*c)
}

// dataDir is a private mirror of espeak-ng's data directory (symbolic
// links) with a writable voices/!v, where profiles become variant files.
type dataDir struct {
	root   string // passed to espeak_Initialize
	system string
}

func (d *dataDir) variantPath(name string) string {
	return d.root + "/voices/!v/" + name
}

func (d *dataDir) stockVariant(name string) (string, error) {
	b, err := os.ReadFile(d.system + "/voices/!v/" + name)
	if err != nil {
		return "", fmt.Errorf("espeak: variant %q: %w", name, err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("espeak: variant %q is not text", name)
	}
	return strings.ReplaceAll(string(b), "\r", ""), nil
}

func (d *dataDir) writeVariant(name, content string) error {
	tmp := d.variantPath(name) + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("espeak: write variant: %w", err)
	}
	return os.Rename(tmp, d.variantPath(name))
}

func (d *dataDir) remove() error { return os.RemoveAll(d.root) }
