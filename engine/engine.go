// Package engine defines what a speech engine is to the rest of voicesvc:
// text in, float32 mono PCM chunks at the engine's native rate out. It also
// holds text segmentation and the worker pool that schedules synthesis
// sentence by sentence.
package engine

import (
	"context"
	"errors"
	"time"
)

// Typed errors that transports map to statuses and codes.
var (
	// ErrBusy: the engine cannot take the request now: the pool's queue is
	// full, or it is at capacity (ErrOverCapacity) (503 upstream_busy,
	// Retry-After).
	ErrBusy = errors.New("engine: busy")
	// ErrInvalidInput: the engine cannot use the text or input (422).
	ErrInvalidInput = errors.New("engine: invalid input")
	// ErrClipUnusable: a reference clip without enough speech; the clone
	// job fails with code clip_unusable.
	ErrClipUnusable = errors.New("engine: clip unusable")
	// ErrUnavailable: no worker can run (WebSocket close 1013).
	ErrUnavailable = errors.New("engine: unavailable")
)

// CatalogVoice is a built-in public voice seeded into the catalog.
type CatalogVoice struct {
	Alias    string            // lowercase letters, digits, hyphens; unique
	Name     string            // display name
	Language string            // BCP-47 primary language
	Labels   map[string]string // gender, accent, age, use_case
	Profile  []byte            // the engine profile that renders this voice
}

// Params are the per-request synthesis parameters, already validated and
// merged with the voice's settings. Zero values mean "engine default".
type Params struct {
	// Speed is a rate multiplier (length_scale is its inverse): the
	// built-in engines honour it exactly from MinSpeed to MaxSpeed and
	// clamp it there; the audio lasts 1/Speed of its length at 1, every
	// word starting at its start at 1 over Speed.
	Speed          float64
	Pitch          float64  // semitones relative to the profile
	Volume         float64  // gain, 1 = unchanged
	Expressiveness *float64 // 0-1: pitch range
	NumStep        int      // recorded; engines without steps ignore it
	GuidanceScale  float64  // recorded; engines without guidance ignore it
}

// The range of Params.Speed the built-in engines honour: the API's speed
// 0.25-4 and the WebSocket's length_scale 0.2-5.
const (
	MinSpeed = 0.2
	MaxSpeed = 5.0
)

// Request is one synthesis. Text is a single sentence or a longer text that
// the pool segments.
type Request struct {
	Text     string
	Language string // BCP-47 tag the engine supports
	Profile  []byte
	Params   Params
	// Due is when a listener needs this audio, for the pool's scheduling:
	// zero means now. A realtime context sets it for its later sentences
	// to when the audio it already has will have played.
	Due time.Time
	// Continues: the request carries on a stream the engine already took
	// (a realtime context's sentence after its first), whose listener has
	// audio until Due. The pool never refuses it for capacity (admission
	// is for new work: a stream once taken is not cut off), and it becomes
	// due shortly before Due, where a new request is due as it arrives.
	Continues bool
	// InHand: the listener still has audio to play (the pool sets it for a
	// sentence that is not due yet), so a worker may deliver the sentence's
	// chunks together when it is done instead of its first chunk at once.
	InHand bool
}

// WordEvent marks where a word of the original text starts in the audio.
type WordEvent struct {
	Index      int // word index in the request text
	TextOffset int // byte offset in the request text
	TextLength int // byte length
	Sample     int // sample position from the start of the request's audio
}

// Chunk is a piece of audio, float32 mono at NativeRate, in order.
type Chunk struct {
	Samples  []float32
	Sentence int         // index of the sentence this chunk belongs to
	Words    []WordEvent // word boundaries that fall within this chunk
	// Last is true on the final chunk of a sentence.
	Last bool
}

// WordTimer is an engine that says whether its chunks report where words
// start (Chunk.Words), which word timestamps are made from. An engine that
// does not implement it reports none.
type WordTimer interface{ WordTimes() bool }

// WordTimes reports whether e's chunks carry the words' starts.
func WordTimes(e Engine) bool {
	w, ok := e.(WordTimer)
	return ok && w.WordTimes()
}

// Clip is decoded reference audio for cloning.
type Clip struct {
	Samples  []float32 // mono
	Rate     int
	Language string
	RefText  string
}

// Engine is a speech engine. Implementations must be safe for concurrent use
// (the pool serializes where the engine itself cannot).
type Engine interface {
	// Name identifies the engine in reports ("espeak-ng", "reference").
	Name() string
	// NativeRate is the sample rate of the chunks Synthesize emits.
	NativeRate() int
	// Languages lists the BCP-47 tags the engine accepts.
	Languages() []string
	// Catalog lists the built-in public voices.
	Catalog() []CatalogVoice
	// Enroll analyses a reference clip and returns a profile.
	// ErrClipUnusable (wrapped, with the reason) when it cannot.
	Enroll(ctx context.Context, clip Clip) ([]byte, error)
	// Synthesize renders req and calls emit for each chunk as soon as it
	// exists. An error from emit stops synthesis and is returned. Returns
	// ctx.Err() when cancelled. A chunk's Samples belong to emit: the
	// engine never touches them again, so a consumer that is done with
	// them may give them back (RecycleSamples).
	Synthesize(ctx context.Context, req Request, emit func(Chunk) error) error
}
