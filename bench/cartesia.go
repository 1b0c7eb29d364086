package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// The cartesia target benchmarks Cartesia's realtime socket at --base, a
// Cartesia base URL: Cartesia itself (https://api.cartesia.ai) or a
// voicesvc's dialect (http://HOST/voice-svc/api/v1/public/compat/cartesia),
// so that a user measures both side by side with one client. An operation
// is one context on a shared socket (--contexts a socket): the text in one
// generation message (continue false, max_buffer_delay_ms 0: spoken at
// once), raw pcm_s16le at --sample-rate; its TTFB is the first chunk's
// receipt, its end the context's done. --key is sent as X-API-Key (with
// Cartesia-Version), --voice is the voice id.
//
// With --native URL (a voicesvc base URL, the same server as --base), the
// native WebSocket of that server is measured too, level by level and
// round by round in turn, and the report adds what the dialect adds to the
// time to first audio byte (the `make bench` row).

// Scenario names of the cartesia target's results.
const (
	scenarioCartesia       = "cartesia"        // --base
	scenarioCartesiaNative = "cartesia-native" // --native's ws
)

// cartesiaVersion is the API version sent (LiveKit's plugin's).
const cartesiaVersion = "2025-04-16"

// cartesiaScenario runs contexts over shared sockets: slot i uses socket
// i/contexts.
type cartesiaScenario struct {
	url, key, voice string
	rate, contexts  int
	genPrefix       []byte // the generation message up to its context_id's value
	dialer          *websocket.Dialer
	socks           []*cartesiaSock
}

func newCartesiaScenario(base, key, voice, text string, rate, contexts int) *cartesiaScenario {
	u := strings.TrimRight(base, "/") + "/tts/websocket"
	u = "ws" + strings.TrimPrefix(u, "http")
	msg, _ := json.Marshal(map[string]any{"model_id": "sonic-3", "transcript": text, "continue": false,
		"voice": map[string]any{"mode": "id", "id": voice}, "language": "en", "max_buffer_delay_ms": 0,
		"output_format": map[string]any{"container": "raw", "encoding": "pcm_s16le", "sample_rate": rate}})
	prefix := append(msg[:len(msg)-1:len(msg)-1], `,"context_id":"`...)
	return &cartesiaScenario{url: u, key: key, voice: voice, rate: rate, contexts: max(1, contexts), genPrefix: prefix,
		dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 16 << 10,
			NetDialContext: unpacedDial}}
}

func (sc *cartesiaScenario) open(ctx context.Context, slots int) error {
	sc.socks = make([]*cartesiaSock, (slots+sc.contexts-1)/sc.contexts)
	for i := range sc.socks {
		sc.socks[i] = &cartesiaSock{sc: sc}
	}
	dialAll(len(sc.socks), func(i int) { _, _ = sc.socks[i].current(ctx) })
	return nil
}

func (sc *cartesiaScenario) close() {
	for _, s := range sc.socks {
		s.mu.Lock()
		if s.c != nil {
			_ = s.c.conn.Close()
			<-s.c.closed
		}
		s.mu.Unlock()
	}
}

// cartesiaSock owns one socket and redials it lazily.
type cartesiaSock struct {
	sc  *cartesiaScenario
	mu  sync.Mutex
	c   *cartesiaConn
	seq atomic.Int64
}

type cartesiaConn struct {
	conn   *websocket.Conn
	wmu    sync.Mutex
	mu     sync.Mutex
	dead   bool
	ctxs   map[string]*cartesiaCtx
	closed chan struct{}
}

type cartesiaCtx struct {
	mu       sync.Mutex
	start    time.Time
	ttfb     time.Duration
	last     time.Time
	gaps     []float64
	bytes    int64
	err      string
	end      time.Time
	finished bool
	done     chan struct{}
}

func (x *cartesiaCtx) finish(key string, now time.Time) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.finished {
		x.finished, x.err, x.end = true, key, now
		close(x.done)
	}
}

func (s *cartesiaSock) current(ctx context.Context) (*cartesiaConn, sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.c; c != nil {
		c.mu.Lock()
		dead := c.dead
		c.mu.Unlock()
		if !dead {
			return c, sample{}
		}
	}
	h := http.Header{}
	h.Set("X-API-Key", s.sc.key)
	h.Set("Cartesia-Version", cartesiaVersion)
	conn, resp, err := s.sc.dialer.DialContext(ctx, s.sc.url, h)
	if err != nil {
		var f sample
		if resp != nil {
			defer resp.Body.Close()
			if failStatus(&f, resp); f.err != "" {
				f.err = "cartesia:handshake_" + f.err
			}
			return nil, f
		}
		return nil, sample{err: netError(err)}
	}
	c := &cartesiaConn{conn: conn, ctxs: map[string]*cartesiaCtx{}, closed: make(chan struct{})}
	s.c = c
	go c.read()
	return c, sample{}
}

// cartesiaMsg is what the reader needs of a server message.
type cartesiaMsg struct {
	Type      string `json:"type"`
	ContextID string `json:"context_id"`
	Data      string `json:"data"`
	ErrorCode string `json:"error_code"`
}

// read is the socket's only reader; times are taken at receipt.
func (c *cartesiaConn) read() {
	defer close(c.closed)
	for {
		_, r, err := c.conn.NextReader()
		now := time.Now()
		if err != nil {
			c.kill(closeKey(err), now)
			return
		}
		b, err := io.ReadAll(r)
		if err != nil {
			c.kill(closeKey(err), now)
			return
		}
		var m cartesiaMsg
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		c.mu.Lock()
		x := c.ctxs[m.ContextID]
		c.mu.Unlock()
		if x == nil {
			continue
		}
		switch m.Type {
		case "chunk":
			x.mu.Lock()
			if x.ttfb == 0 {
				x.ttfb = now.Sub(x.start)
			} else {
				x.gaps = append(x.gaps, Ms(now.Sub(x.last)))
			}
			x.last = now
			x.bytes += int64(len(m.Data) / 4 * 3) // base64: within 2 bytes
			x.mu.Unlock()
		case "done":
			x.finish("", now)
		case "error":
			x.finish("cartesia:"+orUnknown(m.ErrorCode), now)
		}
	}
}

func (c *cartesiaConn) kill(key string, now time.Time) {
	c.mu.Lock()
	c.dead = true
	ctxs := c.ctxs
	c.ctxs = map[string]*cartesiaCtx{}
	c.mu.Unlock()
	for _, x := range ctxs {
		x.finish(key, now)
	}
	_ = c.conn.Close()
}

func (c *cartesiaConn) write(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.conn.WriteMessage(websocket.TextMessage, b)
}

func (sc *cartesiaScenario) do(ctx context.Context, slot int) sample {
	s := sc.socks[slot/sc.contexts]
	start := time.Now()
	c, f := s.current(ctx)
	if c == nil {
		f.start, f.total = start, time.Since(start)
		return f
	}
	id := fmt.Sprintf("c%d", s.seq.Add(1))
	x := &cartesiaCtx{done: make(chan struct{})}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return sample{start: time.Now(), err: "cartesia:socket_lost"}
	}
	c.ctxs[id] = x
	c.mu.Unlock()
	msg := append(append(append([]byte(nil), sc.genPrefix...), id...), `"}`...)
	x.mu.Lock()
	x.start = time.Now()
	x.mu.Unlock()
	if err := c.write(msg); err != nil {
		x.finish(netError(err), time.Now())
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		_ = c.write([]byte(`{"context_id":"` + id + `","cancel":true}`))
		x.finish("client:timeout", time.Now())
	}
	c.mu.Lock()
	delete(c.ctxs, id)
	c.mu.Unlock()
	x.mu.Lock()
	defer x.mu.Unlock()
	out := sample{start: x.start, ttfb: x.ttfb, total: x.end.Sub(x.start), gaps: x.gaps, err: x.err,
		audio: pcmSeconds(x.bytes, 2, sc.rate)}
	if out.err == "" && x.ttfb == 0 {
		out.err = "cartesia:no_audio"
	}
	return out
}

// executeCartesia is Execute for --target cartesia.
func executeCartesia(ctx context.Context, o Options) (*Run, error) {
	if o.Voice == "" {
		return nil, fmt.Errorf("--target cartesia needs --voice (a voice id of the server at --base)")
	}
	maxConns := o.Concurrency
	for _, l := range levelsOf(o) {
		maxConns = max(maxConns, int(l))
	}
	sides := []side{{name: scenarioCartesia, usage: pickProcSource(o.BaseURL, o.ServerPID), mk: func() scenario {
		return newCartesiaScenario(o.BaseURL, o.APIKey, o.Voice, o.Text, o.SampleRate, o.Contexts)
	}}}
	if o.Native != "" {
		client := newHTTPClient(maxConns)
		defer client.CloseIdleConnections()
		t := &target{base: o.Native, apiRoot: o.Native + apiPath, key: o.APIKey, client: client, text: o.Text,
			sampleRate: o.SampleRate, format: "s16le"}
		if err := t.resolveVoice(ctx, o.Voice); err != nil {
			return nil, err
		}
		sides = append(sides, side{name: scenarioCartesiaNative, usage: pickProcSource(o.Native, o.ServerPID),
			mk: func() scenario { return newWSScenario(t, o.Contexts, false, o.TPS) }})
	}
	contexts := max(1, o.Contexts)
	return runSides(ctx, o, sidesRun{engine: "cartesia", format: "s16le", tune: func(_ float64, spec *loadSpec, res *Result) {
		res.Contexts, res.Sessions = contexts, (spec.concurrency+contexts-1)/contexts
	}}, sides)
}
