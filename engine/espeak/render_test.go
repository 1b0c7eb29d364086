package espeak

import (
	"context"
	"reflect"
	"testing"

	"voicesvc/engine"
)

// TestRenderChunking: how espeak-ng's buffers become chunks. A sentence's
// first buffer is emitted alone: eager, as soon as it arrives (someone
// waits for the first audio); otherwise when the next shows it is not the
// last. Later buffers are joined into chunks of chunkMs, and the sentence
// ends with a chunk carrying Last, empty when nothing was left.
func TestRenderChunking(t *testing.T) {
	const rate = 22050 // chunkSamples: 2205
	tests := []struct {
		name    string
		eager   bool
		buffers []int
		// after[i]: the sizes of the chunks emitted once buffer i was
		// given; final: all of them after finish, Last on the final one.
		after []([]int)
		final []int
	}{
		{"eager: one buffer", true, []int{441}, [][]int{{441}}, []int{441, 0}},
		{"eager: first alone, then chunks of chunkMs", true,
			[]int{441, 441, 441, 441, 441, 441, 441, 441},
			[][]int{{441}, {441}, {441}, {441}, {441}, {441}, {441, 2205}, {441, 2205}},
			[]int{441, 2205, 882}},
		{"eager: an empty buffer first (events only)", true, []int{0, 300, 300}, [][]int{nil, {300}, {300}}, []int{300, 300}},
		{"one buffer", false, []int{441}, [][]int{nil}, []int{441}},
		{"first alone at the second, then chunks of chunkMs", false,
			[]int{441, 441, 441, 441, 441, 441, 441, 441},
			[][]int{nil, {441}, {441}, {441}, {441}, {441}, {441, 2205}, {441, 2205}},
			[]int{441, 2205, 882}},
		{"an empty buffer first (events only)", false, []int{0, 300, 300}, [][]int{nil, nil, {300}}, []int{300, 300}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sizes []int
			var lasts []bool
			r := &render{ctx: context.Background(), gain: 1, rate: rate, eager: tc.eager, emit: func(c engine.Chunk) error {
				sizes = append(sizes, len(c.Samples))
				lasts = append(lasts, c.Last)
				return nil
			}}
			r.begin(0, engine.Span{Start: 0, End: 6, Text: "Hello."})
			for i, n := range tc.buffers {
				if r.onAudio(make([]int16, n), nil) {
					t.Fatalf("buffer %d aborted: %v", i, r.err)
				}
				if !reflect.DeepEqual(sizes, tc.after[i]) {
					t.Fatalf("after buffer %d (%d samples): chunks %v, want %v", i, n, sizes, tc.after[i])
				}
			}
			if err := r.finish(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sizes, tc.final) {
				t.Fatalf("chunks %v, want %v", sizes, tc.final)
			}
			for i, last := range lasts {
				if last != (i == len(lasts)-1) {
					t.Fatalf("Last flags %v: only the final chunk carries it", lasts)
				}
			}
		})
	}
}
