package sessions

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
	"github.com/valyala/fasthttp"

	"voicesvc/engine"
	"voicesvc/engine/reference"
)

// Latencies are reported as percentiles in microseconds; ns/op is not
// meaningful for these benchmarks.
func report(b *testing.B, name string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	pct := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))]) / 1e3 }
	b.ReportMetric(pct(0.5), name+"-p50-µs")
	b.ReportMetric(pct(0.99), name+"-p99-µs")
}

const benchSentence = "Hello there, this is one sentence."

var errFirst = errors.New("first chunk")

// BenchmarkFirstAudio: task_start carrying one complete sentence to the
// first binary frame at the client, against the engine alone (request to
// first chunk), with 1 and 32 sessions (or engine callers) at once. After
// its first binary frame a client cancels the context: the benchmark is
// about latency, and streaming every sentence in full would make it a
// throughput test on a 2-core machine shared with the client. rtf=0 renders
// as fast as possible; rtf=0.05 paces the reference engine like a fast
// real engine.
func BenchmarkFirstAudio(b *testing.B) {
	for _, rtf := range []float64{0, 0.05} {
		eng := reference.New(reference.Options{RTF: rtf})
		for _, n := range []int{1, 32} {
			b.Run(fmt.Sprintf("rtf=%g/engine-%d", rtf, n), func(b *testing.B) {
				parallel(b, n, func(int) (time.Duration, error) {
					t0 := time.Now()
					var d time.Duration
					err := eng.Synthesize(context.Background(), engine.Request{Text: benchSentence}, func(engine.Chunk) error {
						d = time.Since(t0)
						return errFirst
					})
					if !errors.Is(err, errFirst) {
						return 0, err
					}
					return d, nil
				})
			})
			b.Run(fmt.Sprintf("rtf=%g/sessions-%d", rtf, n), func(b *testing.B) {
				ts := startServer(b, Config{}, refDeps(eng))
				clients := make([]*client, n)
				for i := range clients {
					clients[i] = ts.dial(b)
				}
				parallel(b, n, func(w int) (time.Duration, error) { return firstAudio(clients[w]) })
			})
		}
	}
}

// parallel runs b.N calls of op over n workers and reports the latencies
// op returns.
func parallel(b *testing.B, n int, op func(worker int) (time.Duration, error)) {
	var mu sync.Mutex
	var lat []time.Duration
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				d, err := op(w)
				if err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, d)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.StopTimer()
	report(b, "first", lat)
}

// firstAudio runs one context, returns the time to its first binary frame
// and cancels it, reading up to task_cancelled so the next starts clean.
func firstAudio(c *client) (time.Duration, error) {
	c.seq++
	id := "c" + strconv.Itoa(c.seq)
	msg := `{"type":"task_start","context_id":"` + id + `","voice_id":"` + voiceReady +
		`","text":"` + benchSentence + `","finalize":true}`
	t0 := time.Now()
	if err := c.ws.WriteMessage(websocket.TextMessage, []byte(msg)); err != nil {
		return 0, err
	}
	var first time.Duration
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return 0, fmt.Errorf("context %s: %w", id, err)
		}
		if typ == websocket.BinaryMessage {
			if first == 0 {
				first = time.Since(t0)
				if err := c.send(`{"type":"task_cancel","context_id":"` + id + `"}`); err != nil {
					return 0, err
				}
			}
			continue
		}
		var head [64]byte
		n, _ := io.ReadFull(r, head[:])
		if bytes.Contains(head[:n], []byte(`"task_cancelled"`)) || bytes.Contains(head[:n], []byte(`"task_done"`)) {
			return first, nil
		}
	}
}

// BenchmarkCancelLatency: task_cancel to task_cancelled while 32 sessions
// stream (busy=paced: real-time engine; busy=flood: the engine renders as
// fast as it can and the queues are full).
func BenchmarkCancelLatency(b *testing.B) {
	for _, mode := range []struct {
		name string
		rtf  float64
	}{{"paced", 1}, {"flood", 0}} {
		b.Run("busy="+mode.name, func(b *testing.B) {
			ts := startServer(b, Config{}, refDeps(reference.New(reference.Options{RTF: mode.rtf})))
			n := 32
			if v, err := strconv.Atoi(os.Getenv("CANCEL_SESSIONS")); err == nil {
				n = v
			}
			var mu sync.Mutex
			var lat []time.Duration
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			for range n {
				c := ts.dial(b)
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for i := 0; left.Add(-1) >= 0; i++ {
						d, err := cancelOnce(c, i)
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, d)
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			report(b, "cancel", lat)
		})
	}
}

func cancelOnce(c *client, i int) (time.Duration, error) {
	id := "k" + strconv.Itoa(i)
	long := strings.Repeat("This sentence keeps the engine busy for a long while ", 20) + "."
	if err := c.send(start(id, long, true)); err != nil {
		return 0, err
	}
	var t0 time.Time
	_ = c.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		typ, r, err := c.ws.NextReader()
		if err != nil {
			return 0, fmt.Errorf("context %s: %w", id, err)
		}
		if typ == websocket.BinaryMessage {
			if t0.IsZero() {
				if err := c.send(`{"type":"task_cancel","context_id":"` + id + `"}`); err != nil {
					return 0, err
				}
				t0 = time.Now()
			}
			continue
		}
		var head [64]byte
		n, _ := io.ReadFull(r, head[:])
		if bytes.Contains(head[:n], []byte(`"task_cancelled"`)) {
			return time.Since(t0), nil
		}
	}
}

// BenchmarkIdleSessionMemory opens 1,000 idle sessions and reports the
// heap + stack and RSS growth per session and the goroutines each keeps:
// for a bare fasthttp/websocket connection (a FastHTTPUpgrader handler
// that only reads), for Run in such a handler (a goroutine blocked in its
// read per session), and for Serve with the poller as the gateway serves
// them (no goroutine while idle), also with a context open. Run with
// -benchtime=1x.
func BenchmarkIdleSessionMemory(b *testing.B) {
	const n = 1000
	for _, mode := range []string{"bare-websocket", "run", "serve", "serve-open-context"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				heap, rss, goroutines := idleMemory(b, n, mode)
				b.ReportMetric(heap, "heap+stack-B/session")
				b.ReportMetric(rss, "rss-B/session")
				b.ReportMetric(goroutines, "goroutines/session")
			}
		})
	}
}

// mode serve-open-context: each client has opened one context (no text
// yet) and had its task_started, then went quiet.
func idleMemory(b *testing.B, n int, mode string) (heapPer, rssPer, goroutinesPer float64) {
	deps := refDeps(nil)
	var addr string
	var opened func() bool
	if strings.HasPrefix(mode, "serve") {
		ts := startServer(b, Config{}, deps)
		addr = ts.addr
		opened = func() bool {
			ts.mu.Lock()
			k := len(ts.handles)
			ts.mu.Unlock()
			if k < n {
				return false
			}
			for i := range n {
				if !ts.session(b, i).s.parked.Load() {
					return false
				}
			}
			return true
		}
	} else {
		var open atomic.Int64
		addr = runServer(b, mode == "bare-websocket", deps, &open)
		opened = func() bool { return open.Load() >= int64(n) }
	}

	heap0, rss0 := memNow()
	g0 := runtime.NumGoroutine()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := rawDial(addr)
		if err != nil {
			b.Fatal(err)
		}
		if mode == "serve-open-context" {
			if err := rawOpenContext(c); err != nil {
				b.Fatal(err)
			}
		}
		conns = append(conns, c)
	}
	for !opened() {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // goroutines on their way out
	heap1, rss1 := memNow()
	g1 := runtime.NumGoroutine()
	if testing.Verbose() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		b.Logf("%s: stack in use %d B/session (all goroutines), heap objects %d, goroutines %d", mode, ms.StackInuse/uint64(n), ms.HeapObjects/uint64(n), runtime.NumGoroutine())
	}
	return (float64(heap1) - float64(heap0)) / float64(n), (float64(rss1) - float64(rss0)) / float64(n),
		float64(g1-g0) / float64(n)
}

// runServer serves sessions with Run in a FastHTTPUpgrader handler (bare:
// a handler that only reads frames) and counts them in open.
func runServer(b *testing.B, bare bool, deps Deps, open *atomic.Int64) string {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	up := &websocket.FastHTTPUpgrader{ReadBufferSize: 1024, WriteBufferSize: 1024, WriteBufferPool: &sync.Pool{},
		CheckOrigin: func(*fasthttp.RequestCtx) bool { return true }}
	var done sync.WaitGroup
	srv := &fasthttp.Server{Handler: func(rc *fasthttp.RequestCtx) {
		done.Add(1)
		if up.Upgrade(rc, func(c *websocket.Conn) {
			defer done.Done()
			open.Add(1)
			if bare {
				c.SetReadLimit(1 << 20)
				for {
					if _, _, err := c.NextReader(); err != nil {
						return
					}
				}
			}
			_ = Run(ctx, c, Config{}, deps)
		}) != nil {
			done.Done()
		}
	}}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		cancel()
		done.Wait()
		_ = srv.Shutdown()
	})
	return ln.Addr().String()
}

// rawDial does the client side of the handshake on a bare socket, so the
// client's own memory per connection is only the socket.
func rawDial(addr string) (net.Conn, error) {
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		return nil, err
	}
	req := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(c, 256)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		if line == "\r\n" {
			return c, nil
		}
	}
}

// rawOpenContext sends a task_start without text as a masked client frame
// (mask key zero) and reads the server's task_started frame.
func rawOpenContext(c net.Conn) error {
	msg := `{"type":"task_start","context_id":"idle","voice_id":"` + voiceReady + `"}`
	frame := append([]byte{0x81, 0x80 | byte(len(msg)), 0, 0, 0, 0}, msg...)
	if _, err := c.Write(frame); err != nil {
		return err
	}
	var head [2]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(c, make([]byte, head[1]&0x7f))
	return err
}

var memGCs = 3

func memNow() (heapStack uint64, rss uint64) {
	for range memGCs {
		runtime.GC()
	}
	debug.FreeOSMemory() // RSS counts live pages, not freed ones the runtime keeps
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			rss = pages * uint64(os.Getpagesize())
		}
	}
	return ms.HeapInuse + ms.StackInuse, rss
}
