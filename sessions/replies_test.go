package sessions

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// A client that reads all the time may send as fast as it likes: 300
// task_start/task_cancel pairs in one burst outrun the writer for a
// moment, and the replies' bound must not take that for a client that
// does not read (it used to close it with 1008). The session stays open
// and every reply arrives, in order.
func TestReplyBurstFromReadingClient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		procs int
	}{
		{"default", Config{}, 0},
		// One P: the reader handles the burst before the writer runs.
		{"default one P", Config{}, 1},
		// A small bound: the burst is many times over it.
		{"small bound", Config{MaxReplies: 2 << 10}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.procs > 0 {
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(tc.procs))
			}
			ts := startServer(t, tc.cfg, refDeps(nil))
			c := ts.dial(t)
			const pairs = 300
			// The reader runs from before the first message to the last
			// reply.
			type result struct {
				evs []event
				err error
			}
			got := make(chan result, 1)
			go func() {
				var r result
				for len(r.evs) < 2*pairs {
					ev, err := c.next()
					if err != nil {
						r.err = err
						break
					}
					r.evs = append(r.evs, ev)
				}
				got <- r
			}()
			// The whole burst in one write.
			var burst bytes.Buffer
			for i := range pairs {
				id := fmt.Sprintf("c%d", i)
				for _, m := range []any{start(id, "", false), map[string]any{"type": "task_cancel", "context_id": id}} {
					b, _ := json.Marshal(m)
					burst.Write(clientFrame(0x1, b))
				}
			}
			nc := c.ws.NetConn()
			_ = nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
			if _, err := nc.Write(burst.Bytes()); err != nil {
				t.Fatal(err)
			}
			var r result
			select {
			case r = <-got:
			case <-time.After(30 * time.Second):
				t.Fatal("replies did not arrive")
			}
			if r.err != nil {
				code := 0
				if ce, ok := r.err.(*websocket.CloseError); ok {
					code = ce.Code
				}
				t.Fatalf("after %d of %d replies: %v (close %d)", len(r.evs), 2*pairs, r.err, code)
			}
			for i := range pairs {
				id := fmt.Sprintf("c%d", i)
				s, x := r.evs[2*i], r.evs[2*i+1]
				if s.Type != "task_started" || s.ContextID != id || x.Type != "task_cancelled" || x.ContextID != id {
					t.Fatalf("pair %d: %s %q, %s %q", i, s.Type, s.ContextID, x.Type, x.ContextID)
				}
			}
			// Still open and working.
			c.mustSend(t, start("after", "Hello there.", true))
			checkDone(t, c.collect(t, isType("task_done", "after"))["after"], "Hello there.")
		})
	}
}

// clientFrame encodes one final, masked client frame of opcode op.
func clientFrame(op byte, p []byte) []byte {
	b := []byte{0x80 | op}
	switch n := len(p); {
	case n <= 125:
		b = append(b, 0x80|byte(n))
	case n <= 0xffff:
		b = append(b, 0x80|126, byte(n>>8), byte(n))
	default:
		b = append(b, 0x80|127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask[:]...)
	for i, x := range p {
		b = append(b, x^mask[i%4])
	}
	return b
}
