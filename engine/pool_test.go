package engine_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

func newPool(t testing.TB, opts engine.PoolOptions) *engine.Pool {
	t.Helper()
	p, err := engine.NewPool(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func collect(ctx context.Context, e engine.Engine, req engine.Request) ([]engine.Chunk, error) {
	var out []engine.Chunk
	err := e.Synthesize(ctx, req, func(c engine.Chunk) error {
		out = append(out, c)
		return nil
	})
	return out, err
}

// requests gives n distinct requests over several sentences and voices.
func requests(n int) []engine.Request {
	cat := reference.New().Catalog()
	out := make([]engine.Request, n)
	for i := range out {
		out[i] = engine.Request{
			Text:    fmt.Sprintf("Request %d starts here. It has %d words, e.g. these! Last one?", i, i%7),
			Profile: cat[i%len(cat)].Profile,
			Params:  engine.Params{Pitch: float64(i % 5), Speed: 1 + float64(i%3)/4},
		}
	}
	return out
}

// TestPoolMatchesEngine: through the pool, 32 requests at once get chunks
// identical (samples bit for bit, sentence indexes, word events) to the
// engine rendering each alone.
func TestPoolMatchesEngine(t *testing.T) {
	ref := reference.New()
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 3})
	reqs := requests(32)
	want := make([][]engine.Chunk, len(reqs))
	for i, r := range reqs {
		var err error
		if want[i], err = collect(context.Background(), ref, r); err != nil {
			t.Fatal(err)
		}
	}
	got := make([][]engine.Chunk, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Go(func() { got[i], errs[i] = collect(context.Background(), p, r) })
	}
	wg.Wait()
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("request %d: pool output differs from the engine's", i)
		}
	}
	if s := p.Stats(); s.Completed != 32 || s.Requests != 0 || s.Active != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestPoolFairness: a short request admitted while a long one runs on the
// only worker finishes long before the long one.
func TestPoolFairness(t *testing.T) {
	ref := reference.New(reference.Options{RTF: 0.01})
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 1})
	long := ""
	for i := range 30 {
		long += fmt.Sprintf("Sentence number %d of the long text. ", i)
	}
	done := make(chan error)
	go func() {
		_, err := collect(context.Background(), p, engine.Request{Text: long})
		done <- err
	}()
	for p.Stats().Active == 0 {
		time.Sleep(time.Millisecond)
	}
	if _, err := collect(context.Background(), p, engine.Request{Text: "Short one."}); err != nil {
		t.Fatal(err)
	}
	rendered := p.Stats().Sentences
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The short request waited for at most a couple of the long request's
	// sentences, not all 30.
	if rendered > 5 {
		t.Errorf("short request finished after %d sentences had been rendered", rendered)
	}
}

// TestPoolNewRequestFirst: a request arriving while several long ones are
// mid-stream gets the next free worker slot (it is due now; they have
// audio in hand), where a round robin would have made it wait for each of
// them.
func TestPoolNewRequestFirst(t *testing.T) {
	ref := reference.New(reference.Options{RTF: 0.01})
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 1})
	long := ""
	for i := range 20 {
		long += fmt.Sprintf("Sentence number %d of a long text. ", i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const streams = 5
	done := make(chan error, streams)
	for range streams {
		go func() {
			_, err := collect(ctx, p, engine.Request{Text: long})
			done <- err
		}()
	}
	// Every long request has rendered a sentence: all are mid-stream.
	for p.Stats().Sentences < 2*streams {
		time.Sleep(time.Millisecond)
	}
	before := p.Stats().Sentences
	if _, err := collect(context.Background(), p, engine.Request{Text: "A new one."}); err != nil {
		t.Fatal(err)
	}
	// The sentences the worker held when it arrived (one rendering, one
	// queued in it), then its own.
	if n := p.Stats().Sentences - before; n > 3 {
		t.Errorf("the new request finished %d sentences after it arrived; want at most 3", n)
	}
	cancel()
	for range streams {
		<-done
	}
}

// TestPoolBusy: beyond QueueDepth requests, Synthesize answers ErrBusy, and
// Ready says so beforehand (busy when full, unavailable once closed).
func TestPoolBusy(t *testing.T) {
	ref := reference.New(reference.Options{RTF: 1})
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 1, QueueDepth: 1})
	if err := p.Ready(); err != nil {
		t.Fatalf("Ready on an empty pool: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error)
	go func() {
		_, err := collect(ctx, p, engine.Request{Text: "A long sentence that takes a few seconds at real time."})
		first <- err
	}()
	for p.Stats().Requests == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := p.Ready(); !errors.Is(err, engine.ErrBusy) {
		t.Errorf("Ready with a full queue: %v, want ErrBusy", err)
	}
	_, err := collect(context.Background(), p, engine.Request{Text: "Hi."})
	if !errors.Is(err, engine.ErrBusy) {
		t.Errorf("second request: %v, want ErrBusy", err)
	}
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first request: %v", err)
	}
	if s := p.Stats(); s.Rejected != 1 || s.Cancelled != 1 {
		t.Errorf("stats %+v", s)
	}
	if err := p.Ready(); err != nil {
		t.Errorf("Ready once the queue drained: %v", err)
	}
	p.Close()
	if err := p.Ready(); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("Ready after Close: %v, want ErrUnavailable", err)
	}
}

// TestPoolCancel: cancelling stops the request within the sentence it is
// in; when Synthesize returns the engine is idle.
func TestPoolCancel(t *testing.T) {
	ref := reference.New(reference.Options{RTF: 1})
	p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 2})
	ctx, cancel := context.WithCancel(context.Background())
	chunks := 0
	err := p.Synthesize(ctx, engine.Request{Text: "First sentence here. Second sentence. Third one."}, func(c engine.Chunk) error {
		chunks++
		if c.Sentence > 0 {
			t.Errorf("got a chunk of sentence %d after cancelling in sentence 0", c.Sentence)
		}
		if chunks == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	if s := p.Stats(); s.Active != 0 || s.Requests != 0 || s.Cancelled != 1 || s.Sentences > 1 {
		t.Errorf("after cancel: %+v", s)
	}
}

// TestPoolEmitError: an error from emit stops the request and is returned.
func TestPoolEmitError(t *testing.T) {
	p := newPool(t, engine.PoolOptions{Engine: reference.New(), Workers: 1})
	boom := errors.New("client went away")
	err := p.Synthesize(context.Background(), engine.Request{Text: "One. Two. Three."}, func(engine.Chunk) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if s := p.Stats(); s.Failed != 1 || s.Requests != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestPoolInvalid(t *testing.T) {
	p := newPool(t, engine.PoolOptions{Engine: reference.New(), Workers: 1})
	tests := []engine.Request{{Text: " \n "}, {Text: "Hola.", Language: "es"}}
	for _, r := range tests {
		if _, err := collect(context.Background(), p, r); !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%q: %v, want ErrInvalidInput", r.Text, err)
		}
	}
}

// TestPoolClose: requests running when the pool closes fail with
// ErrUnavailable instead of hanging; later ones are refused.
func TestPoolClose(t *testing.T) {
	p, err := engine.NewPool(engine.PoolOptions{Engine: reference.New(reference.Options{RTF: 0.05}), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		_, err := collect(context.Background(), p, engine.Request{Text: "One sentence. Two sentences. Three sentences. Four."})
		done <- err
	}()
	for p.Stats().Active == 0 {
		time.Sleep(time.Millisecond)
	}
	p.Close()
	if err := <-done; !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("running request: %v", err)
	}
	if _, err := collect(context.Background(), p, engine.Request{Text: "Hi."}); !errors.Is(err, engine.ErrUnavailable) {
		t.Errorf("after close: %v", err)
	}
}

// inHandLog is a worker that records each sentence's InHand.
type inHandLog struct {
	engine.Worker
	mu   sync.Mutex
	seen []bool
}

func (w *inHandLog) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	w.mu.Lock()
	w.seen = append(w.seen, req.InHand)
	w.mu.Unlock()
	return w.Worker.Synthesize(ctx, req, emit)
}

// TestPoolInHand: the pool tells a worker a sentence's listener has audio
// in hand exactly when the listener does: never for a request's first
// sentence, always for the later ones of a request rendered far ahead of
// real time, never for a request whose listener is behind, and for a
// stream's continuation whose listener has audio (though it is due at
// once: it goes before new requests).
func TestPoolInHand(t *testing.T) {
	text := "The first sentence of this request is long enough. So is the second one of them. And the third."
	tests := []struct {
		name      string
		due       time.Time
		continues bool
		want      []bool
	}{
		{"new", time.Time{}, false, []bool{false, true, true}},
		{"behind", time.Now().Add(-time.Hour), false, []bool{false, false, false}},
		{"continuation in hand", time.Now().Add(time.Hour), true, []bool{true, true, true}},
		{"continuation behind", time.Now().Add(-time.Hour), true, []bool{false, false, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref := reference.New()
			w := &inHandLog{Worker: engine.InProcess(ref)}
			p := newPool(t, engine.PoolOptions{Engine: ref, Workers: 1,
				NewWorker: func(int) (engine.Worker, error) { return w, nil }})
			if _, err := collect(context.Background(), p, engine.Request{Text: text, Due: tc.due, Continues: tc.continues}); err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if !reflect.DeepEqual(w.seen, tc.want) {
				t.Errorf("InHand per sentence %v, want %v", w.seen, tc.want)
			}
		})
	}
}

// TestRecycledMatchesEngine: with chunk buffers going back for reuse after
// every emit, 32 concurrent requests still get exactly the samples of the
// engine rendering each alone (a buffer reused too early, or shared by two
// chunks, would show as another request's audio).
func TestRecycledMatchesEngine(t *testing.T) {
	ref := reference.New()
	rec := engine.Recycled(ref)
	reqs := requests(32)
	// collectCopy keeps a copy of each chunk's samples: the emit contract
	// of Recycled.
	collectCopy := func(e engine.Engine, r engine.Request) ([][]float32, error) {
		var out [][]float32
		err := e.Synthesize(context.Background(), r, func(c engine.Chunk) error {
			out = append(out, append([]float32(nil), c.Samples...))
			return nil
		})
		return out, err
	}
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Go(func() {
			want, err := collectCopy(ref, r)
			if err != nil {
				t.Error(err)
				return
			}
			for range 3 {
				got, err := collectCopy(rec, r)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("recycled rendering of %q differs (%v)", r.Text, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestPoolOverRecycled: a pool given a Recycled engine still delivers the
// engine's samples. Its workers queue chunks for their callers, so
// Recycled's early give-back let the next chunk overwrite one still
// waiting; the pool now recycles after delivery instead.
func TestPoolOverRecycled(t *testing.T) {
	ref := reference.New()
	p := newPool(t, engine.PoolOptions{Engine: engine.Recycled(ref), Workers: 2})
	reqs := requests(16)
	copies := func(e engine.Engine, r engine.Request) ([][]float32, error) {
		var out [][]float32
		err := e.Synthesize(context.Background(), r, func(c engine.Chunk) error {
			out = append(out, append([]float32(nil), c.Samples...))
			time.Sleep(100 * time.Microsecond) // a consumer slower than the engine: chunks queue
			return nil
		})
		return out, err
	}
	var wg sync.WaitGroup
	for _, r := range reqs {
		wg.Go(func() {
			want, err := copies(ref, r)
			if err != nil {
				t.Error(err)
				return
			}
			got, err := copies(p, r)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("pooled rendering of %q differs from the engine's (%v)", r.Text, err)
			}
		})
	}
	wg.Wait()
}
