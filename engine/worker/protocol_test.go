package worker

import (
	"bufio"
	"bytes"
	"errors"
	"reflect"
	"testing"

	"voicesvc/engine"
)

func TestChunkRoundTrip(t *testing.T) {
	tests := []engine.Chunk{
		{},
		{Sentence: 3, Last: true},
		{Samples: []float32{0, -1, 0.5, 1e-9}, Words: []engine.WordEvent{{Index: 1, TextOffset: 7, TextLength: 5, Sample: 1234}}},
	}
	for _, c := range tests {
		var buf bytes.Buffer
		w := bufio.NewWriter(&buf)
		if err := writeChunk(w, 42, c); err != nil || w.Flush() != nil {
			t.Fatal(err)
		}
		if len(c.Samples) == 0 {
			c.Samples = []float32{}
		}
		f, err := readFrame(bufio.NewReader(&buf))
		if err != nil || f.typ != frameChunk || f.id != 42 || f.chunk == nil {
			t.Fatalf("decoded frame %+v, %v", f, err)
		}
		if !reflect.DeepEqual(*f.chunk, c) {
			t.Errorf("decoded %+v, want %+v", *f.chunk, c)
		}
	}
}

// TestReadFrameDecodedTruncated: a stream cut anywhere inside a chunk
// frame is an error, never a chunk.
func TestReadFrameDecodedTruncated(t *testing.T) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	writeChunk(w, 7, engine.Chunk{
		Samples: []float32{0.25, -0.5, 1}, Words: []engine.WordEvent{{Index: 1, Sample: 2}}})
	w.Flush()
	whole := buf.Bytes()
	for cut := 1; cut < len(whole); cut++ {
		f, err := readFrame(bufio.NewReader(bytes.NewReader(whole[:cut])))
		if err == nil {
			t.Fatalf("cut at %d of %d: frame %+v, no error", cut, len(whole), f)
		}
	}
}

func TestRemoteErrorKinds(t *testing.T) {
	for _, k := range kinds {
		err := &remoteError{kind: errorKind(k.err), msg: "x"}
		if !errors.Is(err, k.err) {
			t.Errorf("kind %d does not match %v", k.kind, k.err)
		}
	}
}

// FuzzDecode: whatever bytes arrive, the frame reader (which decodes
// chunks) and the request decoder return an error instead of panicking.
func FuzzDecode(f *testing.F) {
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	writeChunk(w, 1, engine.Chunk{Samples: []float32{1, 2}, Words: []engine.WordEvent{{}}})
	w.Flush()
	f.Add(buf.Bytes())
	f.Add([]byte{0, 0, 0, 9, 'C', 0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			fr, err := readFrame(r)
			if err != nil {
				return
			}
			if fr.typ == frameChunk && fr.chunk == nil {
				t.Fatal("chunk frame without its chunk")
			}
			decodeRequest(fr.payload)
		}
	})
}
