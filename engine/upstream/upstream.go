// Package upstream makes an OpenAI-compatible speech server (Kokoro-FastAPI,
// LocalAI, Speaches, another voicesvc's compat endpoint) an engine.Engine:
// each sentence is one POST {url}/audio/speech asking for streamed pcm,
// read as it arrives and emitted in 20 ms chunks at the upstream's rate
// (a sentence's first audio as soon as it arrives, whatever its length:
// waiting for a whole chunk cost a tenth of a millisecond of time to first
// byte, about half of what the gateway added over the upstream).
//
// An engine has one or more replicas, each with its own keep-alive
// connections and a cap on requests in flight; requests beyond the caps
// wait, earliest deadline first. A sentence goes to the replica with the
// fewest outstanding requests; a replica that fails three times in a row
// (connection failures, timeouts, 5xx answers) is ejected for 5 seconds. A
// sentence that fails before any of its audio was emitted is retried once
// on another replica.
//
// What an upstream may send for a sentence is bounded: its headers (64
// KiB), its audio (max_audio_seconds_per_char of audio a character, at most
// max_sentence_bytes) and the time the sentence waits for it
// (sentence_timeout, its attempts together). Past any of them the sentence
// fails as 502 upstream_error, so that an upstream sending without end, or
// dripping, holds neither memory nor a slot.
//
// The profile of an upstream voice is the upstream's voice name, as bytes.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"voicesvc/engine"
)

// Engine is an upstream engine. It is safe for concurrent use.
type Engine struct {
	cfg   Config
	sched *sched
	chunk int // samples per emitted chunk: 20 ms

	mu         sync.Mutex
	discovered []engine.CatalogVoice
	langs      []string // of the configured and discovered voices
}

var _ engine.Engine = (*Engine)(nil)

// chunkDuration is the audio length of an emitted chunk: what the built-in
// engines emit, and small enough that a chunk waits at most 20 ms of the
// upstream's output before it leaves.
const chunkDuration = 20 * time.Millisecond

// New validates cfg (Config.Validate) and returns its engine. It makes no
// request: Discover lists the upstream's voices.
func New(cfg Config) (*Engine, error) {
	cfg.URLs = slices.Clone(cfg.URLs) // Validate normalizes them: not the caller's
	cfg.Voices = slices.Clone(cfg.Voices)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &sched{slots: cfg.MaxConcurrency, ejectAfter: cfg.EjectAfter, ejectFor: cfg.EjectFor,
		maxWait: cfg.MaxWait, maxWaiting: cfg.MaxWaiting, now: time.Now}
	for _, u := range cfg.URLs {
		r, err := newReplica(u, cfg.MaxConcurrency, cfg.APIKey)
		if err != nil {
			return nil, fmt.Errorf("upstream engine %s: %v", cfg.Name, err)
		}
		s.replicas = append(s.replicas, r)
	}
	e := &Engine{cfg: cfg, sched: s, chunk: max(1, cfg.SampleRate*int(chunkDuration/time.Millisecond)/1000)}
	e.langs = languagesOf(e.Catalog())
	return e, nil
}

// Name is the engine's configured name.
func (e *Engine) Name() string { return e.cfg.Name }

// Type is the upstream's protocol: "openai".
func (e *Engine) Type() string { return e.cfg.Type }

// NativeRate is the upstream's pcm rate: chunks are not resampled here
// (the codec pipeline downstream does it once).
func (e *Engine) NativeRate() int { return e.cfg.SampleRate }

// Languages are those of the configured and discovered voices, each with
// its primary language too ("en-US" and "en"), so that a request for "en"
// or "en-GB" finds an "en-US" voice's engine; empty when there are no
// voices, meaning any well-formed tag. The upstream protocol carries no
// language: the voice decides.
func (e *Engine) Languages() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.langs
}

func languagesOf(voices []engine.CatalogVoice) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range voices {
		primary, _, _ := strings.Cut(v.Language, "-")
		for _, l := range []string{v.Language, strings.ToLower(primary)} {
			if !seen[strings.ToLower(l)] {
				seen[strings.ToLower(l)] = true
				out = append(out, l)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Catalog lists the configured voices, then the discovered ones; each
// profile is the upstream's voice name.
func (e *Engine) Catalog() []engine.CatalogVoice {
	out := make([]engine.CatalogVoice, 0, len(e.cfg.Voices))
	for _, v := range e.cfg.Voices {
		out = append(out, engine.CatalogVoice{Alias: v.Alias, Name: v.Name, Language: v.Language,
			Labels: v.Labels, Profile: []byte(v.Voice)})
	}
	e.mu.Lock()
	out = append(out, e.discovered...)
	e.mu.Unlock()
	return out
}

// errNoCloning: an upstream renders its own voices only.
var errNoCloning = errors.New("upstream engines do not enroll voices: cloning runs on the built-in engine")

// Enroll is not supported.
func (e *Engine) Enroll(context.Context, engine.Clip) ([]byte, error) {
	return nil, errNoCloning
}

// Replicas returns each replica's state and totals, in configured order.
func (e *Engine) Replicas() []ReplicaState { return e.sched.states() }

// Ready fails when every replica is ejected.
func (e *Engine) Ready() error {
	for _, r := range e.Replicas() {
		if r.State == "up" {
			return nil
		}
	}
	return fmt.Errorf("upstream %s: every replica is ejected", e.cfg.Name)
}

// Close drops the kept-alive connections.
func (e *Engine) Close() error {
	for _, r := range e.sched.replicas {
		r.client.closeIdle()
	}
	return nil
}

// Synthesize renders req sentence by sentence, one upstream request each,
// so that a failed sentence can be retried alone and the next sentence
// starts on whichever replica is least loaded. Params.Speed is forwarded;
// the upstream protocol has no pitch or volume.
func (e *Engine) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	if len(req.Profile) == 0 {
		return fmt.Errorf("%w: %v", engine.ErrInvalidInput, errNoVoice)
	}
	sents := engine.Sentences(req.Text)
	if len(sents) == 0 {
		return fmt.Errorf("%w: no text to speak", engine.ErrInvalidInput)
	}
	body := speechBody{Model: e.cfg.Model, Voice: string(req.Profile), ResponseFormat: "pcm", Stream: true}
	if req.Params.Speed > 0 {
		body.Speed = req.Params.Speed
	}
	if len(sents) == 1 {
		body.Input = sents[0].Text
		return e.sentence(ctx, &body, 0, req.Due, emit)
	}
	// The next sentence's request starts as soon as the current one's
	// audio does, so that the gap between sentences is not an upstream
	// round trip; at most one sentence is ahead.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next *ahead
	defer func() {
		if next != nil {
			next.abandon(cancel)
		}
	}()
	for i := range sents {
		cur := next
		if cur == nil {
			cur = e.ahead(ctx, body, sents[i].Text, i, req.Due)
		}
		next = nil
		for c := range cur.chunks {
			if next == nil && i+1 < len(sents) {
				next = e.ahead(ctx, body, sents[i+1].Text, i+1, req.Due)
			}
			if err := emit(c); err != nil {
				cur.abandon(cancel)
				return err
			}
		}
		if cur.err != nil {
			return cur.err
		}
	}
	return nil
}

// aheadChunks bounds the audio a sentence rendered ahead holds before its
// turn: a second of 20 ms chunks. Beyond it the reader waits, and the
// upstream's stream waits in the socket buffers.
const aheadChunks = 50

// ahead is a sentence being rendered in its own goroutine into a bounded
// queue of chunks; err holds its outcome once chunks is closed.
type ahead struct {
	chunks chan engine.Chunk
	err    error
}

func (e *Engine) ahead(ctx context.Context, body speechBody, text string, index int, due time.Time) *ahead {
	a := &ahead{chunks: make(chan engine.Chunk, aheadChunks)}
	body.Input = text
	go func() {
		defer close(a.chunks)
		a.err = e.sentence(ctx, &body, index, due, func(c engine.Chunk) error {
			select {
			case a.chunks <- c:
				return nil
			case <-ctx.Done():
				engine.RecycleSamples(c.Samples)
				return ctx.Err()
			}
		})
	}()
	return a
}

// abandon stops the sentence (cancel ends every request Synthesize
// started) and waits for its goroutine, giving back its queued chunks.
func (a *ahead) abandon(cancel context.CancelFunc) {
	cancel()
	for c := range a.chunks {
		engine.RecycleSamples(c.Samples)
	}
}

// sentence renders one sentence: one attempt, and a second on another
// replica if the first failed before emitting audio and another replica
// might do better.
func (e *Engine) sentence(ctx context.Context, body *speechBody, index int, due time.Time, emit func(engine.Chunk) error) error {
	var failed *replica
	var last error
	left := e.cfg.SentenceTimeout // the attempts take their waits off it
	for try := 0; try < 2; try++ {
		r, err := e.sched.acquire(ctx, due, failed)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failed != nil {
				return last // no other replica: the first failure stands
			}
			return err
		}
		if failed != nil {
			r.stats.retries.Add(1)
		}
		emitted, aerr := e.attemptStale(ctx, r, body, index, &left, emit)
		if aerr == nil {
			e.sched.release(r, classOK, false)
			r.stats.completed.Add(1)
			return nil
		}
		e.sched.release(r, aerr.class, aerr.unhealthy)
		e.count(r, aerr.class)
		if emitted || !aerr.retry || ctx.Err() != nil || left <= 0 {
			return aerr.err
		}
		failed, last = r, aerr.err
	}
	return last
}

func (e *Engine) count(r *replica, c class) {
	switch c {
	case classBusy:
		r.stats.errBusy.Add(1)
	case classInvalid:
		r.stats.errInvalid.Add(1)
	case classUpstream:
		r.stats.errUpstream.Add(1)
	case classCancel:
		r.stats.cancelled.Add(1)
	}
}

// attemptStale runs one attempt on r, and runs it again at once while it
// failed on a kept-alive connection the server had closed (a race with
// its idle timeout, not a sign of ill health). Each such failure takes a
// dead connection out of the pool; with a sentence rendered ahead there
// can be more than one idle, hence up to maxStale resends.
func (e *Engine) attemptStale(ctx context.Context, r *replica, body *speechBody, index int, left *time.Duration, emit func(engine.Chunk) error) (bool, *attemptError) {
	emitted, stale, err := e.attempt(ctx, r, body, index, left, emit)
	for i := 0; stale && i < maxStale; i++ {
		r.stats.staleRetries.Add(1)
		emitted, stale, err = e.attempt(ctx, r, body, index, left, emit)
	}
	return emitted, err
}

// maxStale bounds the resends after stale connections.
const maxStale = 3

// Status is the engine's name, type and each replica's state, for the
// registry's readiness check.
func (e *Engine) Status() engine.Status {
	st := engine.Status{Name: e.cfg.Name, Type: e.cfg.Type}
	for _, r := range e.Replicas() {
		st.Replicas = append(st.Replicas, engine.ReplicaStatus{URL: r.URL, State: r.State,
			Requests: r.Requests, Retries: r.Retries, Ejections: r.Ejections,
			Failures: r.ErrorsBusy + r.ErrorsInvalid + r.ErrorsUpstream})
	}
	return st
}

// RendersAhead: a realtime session starts the next sentence's request
// while the current one streams, so that the gap between sentences is not
// an upstream round trip.
func (e *Engine) RendersAhead() bool { return true }
