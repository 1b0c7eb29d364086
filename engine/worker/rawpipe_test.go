package worker

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"testing"
)

// TestRawPipe: bytes written through one end of a pipe arrive whole and in
// order at the other, across many partial reads and writes that wait in the
// poller (the data is several times the pipe's capacity); the reader then
// sees EOF, and a closed end refuses to be used.
func TestRawPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := newRawPipe(r), newRawPipe(w)
	if pr == nil || pw == nil {
		t.Fatal("os.Pipe's files are not pollable")
	}
	want := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(rng.Uint32())
	}
	written := make(chan error, 1)
	go func() {
		// Writes of odd sizes, so that some fill the pipe part way.
		rest := want
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(200<<10))
			if _, err := pw.Write(rest[:n]); err != nil {
				written <- err
				return
			}
			rest = rest[n:]
		}
		written <- w.Close()
	}()
	var got bytes.Buffer
	buf := make([]byte, 7<<10)
	for {
		n, err := pr.Read(buf)
		got.Write(buf[:n])
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("read %d bytes, not the %d written", got.Len(), len(want))
	}
	r.Close()
	if _, err := pr.Read(buf); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read from a closed end: %v, want os.ErrClosed", err)
	}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("write to a closed end: %v, want os.ErrClosed", err)
	}
}
