package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// An Ahead hands on exactly what the engine renders, in order, and its
// outcome; Cancel stops an engine blocked on a full queue.
func TestRenderAhead(t *testing.T) {
	ref := reference.New(reference.Options{})
	req := engine.Request{Text: "Ahead of its turn. Two sentences.", Language: "en"}
	var want []float32
	if err := ref.Synthesize(context.Background(), req, func(c engine.Chunk) error {
		want = append(want, c.Samples...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	a := engine.RenderAhead(context.Background(), ref, req, 2)
	if engine.WantsAhead(ref) {
		t.Fatal("the reference engine does not render ahead")
	}
	var got []float32
	if err := a.Synthesize(context.Background(), engine.Request{}, func(c engine.Chunk) error {
		got = append(got, c.Samples...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}

	// Never read: the engine fills the queue, waits, and Cancel ends it.
	b := engine.RenderAhead(context.Background(), ref, req, 1)
	b.Cancel()
	stop := errors.New("stop")
	c := engine.RenderAhead(context.Background(), ref, req, 1)
	if err := c.Synthesize(context.Background(), req, func(engine.Chunk) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("emit's error: %v", err)
	}
}
