package reference

import (
	"context"
	"errors"
	"testing"
	"time"

	"voicesvc/engine"
)

func collect(t *testing.T, e *Engine, req engine.Request) []engine.Chunk {
	t.Helper()
	var out []engine.Chunk
	err := e.Synthesize(context.Background(), req, func(c engine.Chunk) error {
		out = append(out, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSynthesize(t *testing.T) {
	tests := []struct {
		name      string
		req       engine.Request
		samples   int
		sentences int
		words     int
	}{
		{"one word", engine.Request{Text: "Hello.", Language: "en"}, 6 * 1440, 1, 1},
		{"two sentences", engine.Request{Text: "Hi there. Bye!"}, 12 * 1440, 2, 3},
		{"speed 2", engine.Request{Text: "Hello.", Params: engine.Params{Speed: 2}}, 6 * 720, 1, 1},
		{"hindi", engine.Request{Text: "नमस्ते दुनिया।", Language: "hi"}, 13 * 1440, 1, 2},
	}
	e := New()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := collect(t, e, tc.req)
			n, words, lastSentence := 0, 0, -1
			for _, c := range chunks {
				n += len(c.Samples)
				words += len(c.Words)
				if c.Last {
					lastSentence = c.Sentence
				}
			}
			if n != tc.samples || words != tc.words || lastSentence != tc.sentences-1 {
				t.Errorf("samples %d words %d last sentence %d; want %d %d %d",
					n, words, lastSentence, tc.samples, tc.words, tc.sentences-1)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	e := New()
	req := engine.Request{Text: "Same text twice. Same audio.", Profile: MarshalProfile(330)}
	a, b := collect(t, e, req), collect(t, e, req)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d chunks", len(a), len(b))
	}
	for i := range a {
		for j := range a[i].Samples {
			if a[i].Samples[j] != b[i].Samples[j] {
				t.Fatalf("chunk %d sample %d differs", i, j)
			}
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		req  engine.Request
	}{
		{"empty", engine.Request{Text: "  \n "}},
		{"language", engine.Request{Text: "Hola.", Language: "es"}},
		{"profile", engine.Request{Text: "Hi.", Profile: []byte("nope")}},
	}
	for _, tc := range tests {
		err := New().Synthesize(context.Background(), tc.req, func(engine.Chunk) error { return nil })
		if !errors.Is(err, engine.ErrInvalidInput) {
			t.Errorf("%s: got %v, want ErrInvalidInput", tc.name, err)
		}
	}
}

func TestPacingAndCancel(t *testing.T) {
	e := New(Options{RTF: 1})
	ctx, cancel := context.WithCancel(context.Background())
	chunks := 0
	err := e.Synthesize(ctx, engine.Request{Text: "A long sentence that would take seconds."}, func(engine.Chunk) error {
		chunks++
		if chunks == 2 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || chunks != 2 {
		t.Fatalf("err %v after %d chunks", err, chunks)
	}
	start := time.Now()
	collect(t, New(Options{RTF: 0}), engine.Request{Text: "Unpaced text renders at once."})
	if time.Since(start) > time.Second {
		t.Log("unpaced rendering was slow (shared machine?)")
	}
}
