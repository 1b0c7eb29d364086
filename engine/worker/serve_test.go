package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// writeLog records each Write the child makes: one per flush of its
// buffer, each a wake-up of the parent.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
	pw     *io.PipeWriter
}

func (l *writeLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	l.writes = append(l.writes, append([]byte(nil), b...))
	l.mu.Unlock()
	return l.pw.Write(b)
}

// serveTest runs Serve over in-memory pipes: requests go in with send,
// frames come out of frames.
type serveTest struct {
	in     *io.PipeWriter
	inW    *bufio.Writer
	frames *bufio.Reader
	log    *writeLog
	served chan error
}

func startServe(t *testing.T, e engine.Engine) *serveTest {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	st := &serveTest{in: inW, inW: bufio.NewWriter(inW), frames: bufio.NewReader(outR),
		log: &writeLog{pw: outW}, served: make(chan error, 1)}
	go func() { st.served <- Serve(inR, st.log, e); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		go io.Copy(io.Discard, outR) // let a blocked writer finish
		select {
		case err := <-st.served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its input closed")
		}
	})
	return st
}

func (st *serveTest) send(t *testing.T, typ byte, id uint64, req *engine.Request) {
	t.Helper()
	var payload [][]byte
	if req != nil {
		b, err := encodeRequest(*req)
		if err != nil {
			t.Fatal(err)
		}
		payload = append(payload, b)
	}
	if err := writeFrame(st.inW, typ, id, payload...); err != nil || st.inW.Flush() != nil {
		t.Fatal(err)
	}
}

// result reads frames up to the next done or error frame and returns its
// id, the chunks before it, and the error it carried.
func (st *serveTest) result(t *testing.T) (uint64, []engine.Chunk, error) {
	t.Helper()
	var chunks []engine.Chunk
	for {
		f, err := readFrame(st.frames)
		if err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		switch f.typ {
		case frameChunk:
			chunks = append(chunks, *f.chunk)
		case frameDone:
			return f.id, chunks, nil
		case frameError:
			return f.id, chunks, &remoteError{kind: f.payload[0], msg: string(f.payload[1:])}
		}
	}
}

// TestServeOrderAndCancel: requests run one at a time in arrival order, a
// cancel stops a queued request before it starts and a running one within
// its sentence, and each request ends with exactly one done or error frame.
func TestServeOrderAndCancel(t *testing.T) {
	st := startServe(t, reference.New(reference.Options{RTF: 1}))
	long := &engine.Request{Text: "A sentence of a few seconds at real time, paced by the engine."}
	short := &engine.Request{Text: "Short."}
	st.send(t, frameRequest, 1, long)
	st.send(t, frameRequest, 2, short)
	st.send(t, frameRequest, 3, short)
	st.send(t, frameCancel, 2, nil) // queued behind 1: never starts
	st.send(t, frameCancel, 1, nil) // running: stops mid-sentence

	want := []struct {
		id       uint64
		canceled bool
	}{{1, true}, {2, true}, {3, false}}
	for _, w := range want {
		id, chunks, err := st.result(t)
		if id != w.id {
			t.Fatalf("result for request %d, want %d", id, w.id)
		}
		if w.canceled != errors.Is(err, context.Canceled) || (!w.canceled && err != nil) {
			t.Errorf("request %d: %v (canceled %v)", id, err, w.canceled)
		}
		if w.canceled && len(chunks) > 0 && chunks[len(chunks)-1].Last {
			t.Errorf("request %d: cancelled, yet its sentence finished", id)
		}
		if !w.canceled && (len(chunks) == 0 || !chunks[len(chunks)-1].Last) {
			t.Errorf("request %d: %d chunks, no last", id, len(chunks))
		}
	}
}

// TestServeWrites: a sentence whose listener waits goes out in two writes
// (its first chunk at once, the rest with the done frame); one whose
// listener has audio in hand goes out in one.
func TestServeWrites(t *testing.T) {
	tests := []struct {
		inHand bool
		writes int
	}{{false, 2}, {true, 1}}
	for _, tc := range tests {
		st := startServe(t, reference.New())
		st.send(t, frameRequest, 1, &engine.Request{Text: "One sentence of about two seconds of audio.", InHand: tc.inHand})
		_, chunks, err := st.result(t)
		if err != nil || len(chunks) < 3 {
			t.Fatalf("in hand %v: %d chunks, %v", tc.inHand, len(chunks), err)
		}
		st.log.mu.Lock()
		n := len(st.log.writes)
		st.log.mu.Unlock()
		if n != tc.writes {
			t.Errorf("in hand %v: %d chunks in %d writes, want %d writes", tc.inHand, len(chunks), n, tc.writes)
		}
	}
}

// TestServeWaitingFirst: a request whose listener is waiting is rendered
// before those queued ahead of it whose listeners have audio in hand, and
// after the one already rendering and other waiting ones.
func TestServeWaitingFirst(t *testing.T) {
	st := startServe(t, reference.New(reference.Options{RTF: 0.05}))
	sentence := "A sentence that takes a little while to render when paced."
	for id, inHand := range []bool{false, true, true, false, true, false} {
		st.send(t, frameRequest, uint64(id+1), &engine.Request{Text: sentence, InHand: inHand})
	}
	// 1 is rendering (or queued first) before the others arrive; the
	// waiting 4 and 6 then go before the in-hand 2, 3 and 5.
	want := []uint64{1, 4, 6, 2, 3, 5}
	var got []uint64
	for range want {
		id, _, err := st.result(t)
		if err != nil {
			t.Fatalf("request %d: %v", id, err)
		}
		got = append(got, id)
	}
	if !slices.Equal(got, want) {
		t.Errorf("rendered in order %v, want %v", got, want)
	}
}
