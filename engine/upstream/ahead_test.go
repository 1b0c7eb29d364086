package upstream

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"voicesvc/engine"
)

// TestNextSentenceAhead: the next sentence's request starts while the
// current one streams, so that the gap between sentences is not an
// upstream round trip; never more than one sentence ahead; the audio still
// comes in order.
func TestNextSentenceAhead(t *testing.T) {
	f := newFixture(t)
	hold := make(chan struct{})
	f.piece = 4096  // a first piece of several chunks
	f.setHold(hold) // every stream pauses after its first piece
	e := newEngine(t, []string{f.srv.URL}, nil)
	type result struct {
		chunks []engine.Chunk
		err    error
	}
	done := make(chan result, 1)
	go func() {
		c, err := speak(context.Background(), e, "One. Two. Three.", time.Time{})
		done <- result{c, err}
	}()
	var started []string
	for len(started) < 2 {
		select {
		case in := <-f.started:
			started = append(started, in)
		case <-time.After(5 * time.Second):
			t.Fatalf("the second sentence did not start while the first streams: started %q", started)
		}
	}
	if !slices.Equal(started, []string{"One.", "Two."}) {
		t.Fatalf("started %q", started)
	}
	// The third waits for the second's turn: one ahead at most.
	select {
	case in := <-f.started:
		t.Fatalf("%q started while the first sentence still streams", in)
	case <-time.After(100 * time.Millisecond):
	}
	f.release()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := samplesOf(slices.Concat(render("One.", 0), render("Two.", 0), render("Three.", 0)))
	if got := joined(r.chunks); !slices.Equal(got, want) {
		t.Fatalf("%d samples, want %d in order", len(got), len(want))
	}
	for i, c := range r.chunks[1:] {
		if c.Sentence < r.chunks[i].Sentence {
			t.Fatalf("chunk %d of sentence %d after sentence %d", i+1, c.Sentence, r.chunks[i].Sentence)
		}
	}
}

// TestAheadStopsWithTheConsumer: a consumer that fails stops both the
// current sentence and the one ahead (their requests are closed).
func TestAheadStopsWithTheConsumer(t *testing.T) {
	f := newFixture(t)
	f.piece = 4096
	hold := make(chan struct{})
	f.setHold(hold)
	defer f.release()
	e := newEngine(t, []string{f.srv.URL}, nil)
	stop := errors.New("listener left")
	n := 0
	err := e.Synthesize(context.Background(), engine.Request{Text: "One. Two. Three.", Profile: []byte("v")},
		func(c engine.Chunk) error {
			if n++; n == 1 {
				// The second sentence starts once the first has audio.
				select {
				case <-f.started:
				case <-time.After(5 * time.Second):
				}
				select {
				case <-f.started:
				case <-time.After(5 * time.Second):
					t.Error("no sentence ahead")
				}
				return stop
			}
			return nil
		})
	if !errors.Is(err, stop) {
		t.Fatalf("err %v, want the consumer's", err)
	}
	for i := 0; i < 2; i++ {
		select {
		case <-f.gone:
		case <-time.After(5 * time.Second):
			t.Fatalf("request %d was not closed", i+1)
		}
	}
}
