package sessions

import (
	"bytes"
	"encoding/binary"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// The writer's own frame encoding, at each length form of RFC 6455 5.2.
func TestAppendWSFrame(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 65535, 65536, 70000} {
		p := bytes.Repeat([]byte{'x'}, n)
		b := appendWSFrame(nil, websocket.BinaryMessage, p)
		if b[0] != 0x82 {
			t.Fatalf("n=%d: first byte %#x", n, b[0])
		}
		var size, head int
		switch l := int(b[1]); {
		case l&0x80 != 0:
			t.Fatalf("n=%d: masked", n)
		case l <= 125:
			size, head = l, 2
		case l == 126:
			size, head = int(binary.BigEndian.Uint16(b[2:])), 4
			if n <= 125 {
				t.Fatalf("n=%d: 16-bit length for a short frame", n)
			}
		default:
			size, head = int(binary.BigEndian.Uint64(b[2:])), 10
			if n <= 0xffff {
				t.Fatalf("n=%d: 64-bit length for a medium frame", n)
			}
		}
		if size != n || len(b) != head+n || !bytes.Equal(b[head:], p) {
			t.Fatalf("n=%d: decoded size %d, frame %d bytes", n, size, len(b))
		}
	}
	if b := appendWSFrame(nil, websocket.TextMessage, []byte("{}")); !bytes.Equal(b, []byte{0x81, 2, '{', '}'}) {
		t.Fatalf("text frame % x", b)
	}
}

// Pings are answered through the writer, also while audio streams, and
// the pairing rule holds around the pongs.
func TestPingDuringStream(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	pongs := make(chan string, 16)
	c.ws.SetPongHandler(func(s string) error { pongs <- s; return nil })
	if err := c.ws.WriteControl(websocket.PingMessage, []byte("idle"), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	c.mustSend(t, start("a", "One sentence here. And a second one. And a third.", true))
	for i := range 5 {
		if err := c.ws.WriteControl(websocket.PingMessage, []byte{byte('0' + i)}, time.Now().Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		c.mustNext(t)
	}
	checkDone(t, c.collect(t, isType("task_done", "a"))["a"], "One sentence here.", "And a second one.", "And a third.")
	// The server reads in order and its replies share the lane with the
	// pongs: once this error is read, every pong has been.
	c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": "none"})
	c.until(t, isType("error", "none"))
	var got []string
	for len(got) < 6 {
		select {
		case p := <-pongs:
			got = append(got, p)
		default:
			t.Fatalf("pongs %q, want 6", got)
		}
	}
	if got[0] != "idle" || got[5] != "4" {
		t.Fatalf("pongs %q", got)
	}
}

// A client's close is echoed (once the writer has stopped).
func TestClientClose(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	c.mustSend(t, start("a", "One sentence here. And a second one.", true))
	c.mustNext(t)
	msg := websocket.FormatCloseMessage(websocket.CloseGoingAway, "")
	if err := c.ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.expectClose(t); code != websocket.CloseGoingAway {
		t.Fatalf("close %d, want the echo of 1001", code)
	}
}

// A context whose synthesis is over but whose task_done is still queued
// behind its audio is cancelled, not refused: the client has not seen it
// end. Only a cancel after task_done may be refused.
func TestCancelBeforeTaskDone(t *testing.T) {
	ts := startServer(t, Config{}, refDeps(nil))
	c := ts.dial(t)
	text := strings.Repeat("A fairly long sentence for the flood. ", 3)
	for k := range 30 {
		id := "k" + strconv.Itoa(k)
		c.mustSend(t, start(id, text, true))
		c.until(t, isType("audio_chunk", id))
		c.mustSend(t, map[string]any{"type": "task_cancel", "context_id": id})
		done := false
		for {
			ev := c.mustNext(t)
			if ev.Type == "task_cancelled" || ev.Type == "error" && done {
				break
			}
			switch {
			case ev.Type == "task_done":
				done = true
			case ev.Type == "error":
				t.Fatalf("cancel %d before task_done refused: %q", k, ev.Message)
			case done:
				t.Fatalf("cancel %d: %s after task_done", k, ev.Type)
			}
		}
	}
}

// A client that pings (or sends bad messages) and never reads is closed
// with 1008 once its replies fill their cap and its socket takes nothing
// for half the write timeout; the session's memory stays
// bounded whatever it sends. Before the cap, every pong was queued: 200,000
// pings grew the heap by about 60 MB.
func TestUnreadRepliesBounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(c *client) error
	}{
		{"pings", func(c *client) error {
			return c.ws.WriteControl(websocket.PingMessage, bytes.Repeat([]byte{'p'}, 125), time.Now().Add(time.Minute))
		}},
		{"invalid messages", func(c *client) error {
			return c.ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"nope"}`))
		}},
		// Contexts with nothing to speak end at once: task_started and
		// task_done for each, on both lanes.
		{"finished contexts", func(c *client) error {
			return c.ws.WriteMessage(websocket.TextMessage,
				[]byte(`{"type":"task_start","context_id":"a","voice_id":"`+voiceReady+`","text":".","finalize":true}`))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Small socket buffers on the path from server to client: the
			// server's writes block after a few replies, not after the
			// megabytes the kernel would buffer.
			// (The client's is set before it connects: set later, Linux
			// keeps the window it advertised and buffers megabytes.)
			small := func(c *net.TCPConn) error { return c.SetWriteBuffer(16 << 10) }
			ts := startServer(t, Config{WriteTimeout: 20 * time.Second}, refDeps(nil), small)
			c := ts.dialSmall(t, 16<<10)
			base := heapInUse()
			stop := make(chan struct{})
			peak := make(chan uint64)
			go func() { peak <- samplePeakHeap(stop) }()
			// The sender stops once the server has seen that its replies
			// are not read; until then it may block in a write (the server
			// stops reading first), which the server's drain of its input
			// completes.
			const max = 200_000
			var sent atomic.Int64
			var stopSending atomic.Bool
			sender := make(chan struct{})
			go func() {
				defer close(sender)
				for sent.Load() < max && !stopSending.Load() && tc.send(c) == nil {
					sent.Add(1)
				}
			}()
			x := ts.session(t, 0).s
			overflowed := func() bool {
				x.mu.Lock()
				defer x.mu.Unlock()
				return x.overflowed
			}
			for deadline := time.Now().Add(time.Minute); !overflowed(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					close(stop)
					t.Fatalf("after %d messages whose replies are never read, the session is still open; the heap grew by %d MB",
						sent.Load(), (int64(<-peak)-int64(base))>>20)
				}
			}
			stopSending.Store(true)
			close(stop)
			if grown := int64(<-peak) - int64(base); grown > 8<<20 {
				t.Errorf("heap grew by %d MB for %d messages", grown>>20, sent.Load())
			}
			// Now read: what was queued, then the close.
			code, _ := c.expectClose(t)
			if code != websocket.ClosePolicyViolation {
				t.Errorf("close %d, want 1008", code)
			}
			<-sender
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// samplePeakHeap returns the largest heap in use seen until stop closes.
func samplePeakHeap(stop chan struct{}) uint64 {
	var m runtime.MemStats
	var peak uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		runtime.ReadMemStats(&m)
		peak = max(peak, m.HeapInuse)
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}
