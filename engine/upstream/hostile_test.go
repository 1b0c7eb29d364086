package upstream

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"voicesvc/control"
	"voicesvc/engine"
	"voicesvc/synth"
)

// hostile is an upstream on a raw TCP listener on 127.0.0.1 that reads
// each request and answers it with its behavior, counting the bytes it
// got written into the connection. Cleanup closes the listener and every
// connection, and waits for their goroutines.
type hostile struct {
	ln      net.Listener
	answer  func(w *countWriter) // writes until an error or its own end
	written atomic.Int64         // bytes accepted by the sockets, every connection
	ended   chan error           // each answer's end: the write error, nil when it stopped by itself

	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// countWriter counts what the connection accepted.
type countWriter struct {
	c net.Conn
	h *hostile
}

func (w *countWriter) Write(p []byte) (int, error) {
	n, err := w.c.Write(p)
	w.h.written.Add(int64(n))
	return n, err
}

func newHostile(t *testing.T, answer func(w *countWriter)) *hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{ln: ln, answer: answer, ended: make(chan error, 16)}
	h.wg.Add(1)
	go h.accept()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	})
	return h
}

func (h *hostile) url() string { return "http://" + h.ln.Addr().String() + "/v1" }

func (h *hostile) accept() {
	defer h.wg.Done()
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		h.mu.Lock()
		h.conns = append(h.conns, c)
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			defer c.Close()
			req, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			w := &countWriter{c: c, h: h}
			h.answer(w)
			select {
			case h.ended <- w.err():
			default:
			}
		}()
	}
}

// waitClosed waits until the client closes the connection, for at most d.
func (w *countWriter) waitClosed(d time.Duration) {
	w.c.SetReadDeadline(time.Now().Add(d))
	io.Copy(io.Discard, w.c)
}

// err probes the connection: a write to a connection the client closed
// fails (at the latest on the second write, after the peer's reset).
func (w *countWriter) err() error {
	for range 2 {
		if _, err := w.c.Write([]byte{0}); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// hostileCap is where a hostile answer gives up by itself: far more than
// any bound the engine should apply to the test's sentence, so that an
// engine without bounds reads it all and returns (and the test fails
// instead of hanging).
const hostileCap = 64 << 20

const pcmHead = "HTTP/1.1 200 OK\r\nContent-Type: audio/pcm\r\nConnection: close\r\n"

// endlessBody: 200 audio/pcm without Content-Length, then pcm without end.
func endlessBody(w *countWriter) {
	if _, err := io.WriteString(w, pcmHead+"\r\n"); err != nil {
		return
	}
	buf := make([]byte, 16<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for n := 0; n < hostileCap; n += len(buf) {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
}

// endlessHeaderLines: a header block of ever more short lines.
func endlessHeaderLines(w *countWriter) {
	if _, err := io.WriteString(w, pcmHead); err != nil {
		return
	}
	line := []byte("X-Pad: " + strings.Repeat("a", 90) + "\r\n")
	for n := 0; n < hostileCap; n += len(line) {
		if _, err := w.Write(line); err != nil {
			return
		}
	}
	io.WriteString(w, "\r\n")
}

// endlessHeaderLine: one header line without end.
func endlessHeaderLine(w *countWriter) {
	if _, err := io.WriteString(w, pcmHead+"X-Long: "); err != nil {
		return
	}
	buf := []byte(strings.Repeat("b", 16<<10))
	for n := 0; n < hostileCap; n += len(buf) {
		if _, err := w.Write(buf); err != nil {
			return
		}
	}
	io.WriteString(w, "\r\n\r\n")
}

// drip: the headers, then a byte of audio every 20 ms, for a minute.
func drip(w *countWriter) {
	if _, err := io.WriteString(w, pcmHead+"\r\n"); err != nil {
		return
	}
	for range 3000 {
		if _, err := w.Write([]byte{1}); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hugeLength declares a gigabyte, sends a little and stalls.
func hugeLength(w *countWriter) {
	if _, err := io.WriteString(w, pcmHead+"Content-Length: 1000000000\r\n\r\n"+strings.Repeat("\x00", 960)); err != nil {
		return
	}
	w.waitClosed(time.Minute)
}

// TestHostileUpstream: an upstream that sends without end (its body, its
// header lines, one header line), drips, or declares a gigabyte fails the
// sentence as 502 upstream_error within the sentence's bounds: in bytes
// (what was read and allocated stays near the sentence's ceiling), in time
// (sentence_timeout), with the replica's slot given back.
func TestHostileUpstream(t *testing.T) {
	const (
		text            = "Endless." // 8 characters: a ceiling of 8 s of audio, 384000 bytes at 24 kHz
		sentenceTimeout = 1500 * time.Millisecond
		// The sockets hold a few MiB the client never read.
		socketSlack = 16 << 20
	)
	tests := []struct {
		name    string
		answer  func(*countWriter)
		within  time.Duration // how soon the failure must come
		message string        // in the error
	}{
		{"endless body", endlessBody, sentenceTimeout, "sent more than the 384000 bytes allowed"},
		{"endless header lines", endlessHeaderLines, sentenceTimeout, "headers are larger than 64 KiB"},
		{"endless header line", endlessHeaderLine, sentenceTimeout, "headers are larger than 64 KiB"},
		{"drip", drip, sentenceTimeout, "sentence_timeout"},
		{"huge content-length", hugeLength, time.Second, "declared Content-Length 1000000000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, tc.answer)
			e := newEngine(t, []string{h.url()}, func(c *Config) { c.SentenceTimeout = sentenceTimeout })
			// A bound the old engine lacks must not hang the test: past
			// this, the caller gives up (which is not upstream_error).
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			var audio int64
			err := e.Synthesize(ctx, engine.Request{Text: text, Profile: []byte("en-us-linda")},
				func(c engine.Chunk) error {
					audio += int64(2 * len(c.Samples))
					return nil
				})
			took := time.Since(start)
			runtime.ReadMemStats(&after)

			if code := control.ErrorCode(synth.EngineError(err)); code != control.EUpstreamError {
				t.Fatalf("err %v: code %q, want %s", err, code, control.EUpstreamError)
			}
			if !strings.Contains(err.Error(), tc.message) {
				t.Errorf("err %v, want one about %q", err, tc.message)
			}
			if took > tc.within+time.Second {
				t.Errorf("failed after %v, want within %v", took, tc.within)
			}
			if limit := e.cfg.maxSentenceBytes(text, 0); audio > limit {
				t.Errorf("emitted %d bytes of audio, above the %d allowed", audio, limit)
			}
			if w := h.written.Load(); w > e.cfg.maxSentenceBytes(text, 0)+socketSlack {
				t.Errorf("the upstream got %d bytes out, want the client to stop reading near %d", w, e.cfg.maxSentenceBytes(text, 0))
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 16<<20 {
				t.Errorf("allocated %d MiB during the sentence", alloc>>20)
			}
			// The connection is closed: the upstream's writes fail.
			if werr := recv(t, h.ended, "the upstream's answer to end"); werr == nil {
				t.Error("the upstream's connection is still open")
			}
			st := e.Replicas()[0]
			if st.Outstanding != 0 || st.ErrorsUpstream != 1 || st.Cancelled != 0 {
				t.Errorf("replica after: %+v", st)
			}
			// The slot is free: the next sentence gets it at once (and
			// fails the same way).
			if r, err := e.sched.acquire(context.Background(), time.Time{}, nil); err != nil {
				t.Errorf("no slot after the failure: %v", err)
			} else {
				e.sched.release(r, classCancel, false)
			}
		})
	}
}

// TestSentenceTimeoutAcrossAttempts: a sentence's attempts share one
// sentence_timeout: a stall that used it up is not retried on another
// replica for as long again.
func TestSentenceTimeoutAcrossAttempts(t *testing.T) {
	stall := func(w *countWriter) {
		io.WriteString(w, pcmHead+"\r\n")
		w.waitClosed(5 * time.Second)
	}
	a, b := newHostile(t, stall), newHostile(t, stall)
	e := newEngine(t, []string{a.url(), b.url()}, func(c *Config) {
		c.Timeout, c.SentenceTimeout = 400*time.Millisecond, 600*time.Millisecond
	})
	start := time.Now()
	_, err := speak(context.Background(), e, "Nobody answers.", time.Time{})
	if !errors.Is(err, errSentenceTimeout) {
		t.Fatalf("err %v, want the sentence timeout", err)
	}
	if took := time.Since(start); took < 550*time.Millisecond || took > 1100*time.Millisecond {
		t.Errorf("failed after %v, want about the 600ms of sentence_timeout", took)
	}
	var tries uint64
	for _, st := range e.Replicas() {
		tries += st.Requests
		if st.Outstanding != 0 {
			t.Errorf("replica after: %+v", st)
		}
	}
	if tries != 2 {
		t.Errorf("%d attempts, want the first and one retry", tries)
	}
}

// TestSentenceTimeoutExcludesListener: the sentence's clock, like the
// stall timeout, runs only while the engine waits for the upstream: a
// listener that takes its time does not fail a sound upstream.
func TestSentenceTimeoutExcludesListener(t *testing.T) {
	f := newFixture(t)
	f.piece = 4096
	e := newEngine(t, []string{f.srv.URL}, func(c *Config) { c.SentenceTimeout = 100 * time.Millisecond })
	n := 0
	err := e.Synthesize(context.Background(), engine.Request{Text: "A listener that reads slowly.", Profile: []byte("v")},
		func(c engine.Chunk) error {
			if n++; n <= 3 {
				time.Sleep(100 * time.Millisecond) // 300 ms in all, three times the sentence_timeout
			}
			return nil
		})
	if err != nil {
		t.Fatalf("a slow listener timed the sentence out: %v", err)
	}
}

// TestSentenceBytes: the ceiling scales with the characters (runes) and
// a speed below 1, at the engine's rate, under max_sentence_bytes; a sound
// answer fits it.
func TestSentenceBytes(t *testing.T) {
	c := Config{SampleRate: 24000, MaxAudioSecondsPerChar: 1, MaxSentenceBytes: 1 << 20}
	for _, tc := range []struct {
		text  string
		speed float64
		want  int64
	}{
		{"Hello.", 0, 6 * 48000},
		{"Hello.", 1.5, 6 * 48000},
		{"Hello.", 0.5, 12 * 48000},
		{"日本語。", 0, 4 * 48000},
		{"", 0, 960}, // one 20 ms chunk
		{strings.Repeat("a", 100), 0, 1 << 20},
	} {
		if got := c.maxSentenceBytes(tc.text, tc.speed); got != tc.want {
			t.Errorf("%q at %g: %d, want %d", tc.text, tc.speed, got, tc.want)
		}
	}
	const text = "A sound answer fits its ceiling."
	if n, limit := int64(len(render(text, 0))), DefaultMaxAudioSecondsPerChar*float64(len(text))*24000*2; float64(n) > limit/4 {
		t.Errorf("the reference engine's %d bytes are near the ceiling %g", n, limit)
	}
}

// TestHostileAhead: with a sentence rendered ahead, a hostile upstream
// still fails the request as upstream_error within the bounds, and both
// sentences' slots come back.
func TestHostileAhead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*countWriter)
	}{{"endless body", endlessBody}, {"drip", drip}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHostile(t, tc.answer)
			e := newEngine(t, []string{h.url()}, func(c *Config) { c.SentenceTimeout = 500 * time.Millisecond })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := speak(ctx, e, "First sentence. Second sentence.", time.Time{})
			if code := control.ErrorCode(synth.EngineError(err)); code != control.EUpstreamError {
				t.Fatalf("err %v: code %q, want %s", err, code, control.EUpstreamError)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("failed after %v", took)
			}
			eventually(t, "the slots to come back", func() bool { return e.Replicas()[0].Outstanding == 0 })
		})
	}
}
