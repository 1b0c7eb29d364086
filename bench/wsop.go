package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/websocket"
)

// wsScenario runs realtime contexts over shared sessions: slot i uses session
// i/contexts, so `contexts` operations share one socket as in production.
type wsScenario struct {
	t        *target
	url      string // ws://.../stream
	contexts int    // per session, at most 4 by contract
	stream   bool   // text word by word over task_continue
	tps      float64
	dialer   *websocket.Dialer
	sessions []*wsSession

	strayMu sync.Mutex
	stray   map[string]int // error frames no context can own
}

func newWSScenario(t *target, contexts int, stream bool, tps float64) *wsScenario {
	u := "ws" + strings.TrimPrefix(t.apiRoot, "http") + "/stream"
	return &wsScenario{
		t: t, url: u, contexts: max(1, contexts), stream: stream, tps: tps,
		dialer: &websocket.Dialer{HandshakeTimeout: 10 * time.Second, ReadBufferSize: 64 << 10, WriteBufferSize: 16 << 10,
			NetDialContext: unpacedDial},
		stray: map[string]int{},
	}
}

// open dials every session up front (a few at a time) so that handshakes are
// not inside the first contexts' TTFB. A failed dial is retried by do.
func (sc *wsScenario) open(ctx context.Context, slots int) error {
	n := (slots + sc.contexts - 1) / sc.contexts
	sc.sessions = make([]*wsSession, n)
	for i := range sc.sessions {
		sc.sessions[i] = &wsSession{sc: sc}
	}
	dialAll(n, func(i int) { _, _ = sc.sessions[i].current(ctx) })
	return nil
}

// dialAll runs dial(i) for every i below n, 32 at a time, and waits for
// them all: the sockets of a shared-socket scenario dialled up front.
func dialAll(n int, dial func(i int)) {
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dial(i)
		}()
	}
	wg.Wait()
}

func (sc *wsScenario) close() {
	var wg sync.WaitGroup
	for _, s := range sc.sessions {
		wg.Add(1)
		go func() { defer wg.Done(); s.end() }()
	}
	wg.Wait()
}

func (sc *wsScenario) addStray(key string) {
	sc.strayMu.Lock()
	sc.stray[key]++
	sc.strayMu.Unlock()
}

// wsSession owns the current connection of one session and redials it lazily.
type wsSession struct {
	sc  *wsScenario
	mu  sync.Mutex
	c   *wsConn
	seq atomic.Int64
}

// wsConn is one socket: a single reader goroutine and serialized writers.
type wsConn struct {
	conn   *websocket.Conn
	wmu    sync.Mutex
	mu     sync.Mutex
	dead   bool
	ctxs   map[string]*wsCtx
	closed chan struct{} // reader exited
}

// wsCtx is the state of one context, written by the reader goroutine.
type wsCtx struct {
	mu       sync.Mutex
	start    time.Time
	ttfb     time.Duration
	last     time.Time
	gaps     []float64
	audio    float64 // sum of audio_chunk.audio_duration_s
	total    float64 // task_done.total_audio_duration_s
	srvTTFB  float64 // task_done.profile.ttfb_ms
	bytes    int64   // binary bytes, the fallback measure of audio
	bps      int     // from task_started
	rate     int
	err      string
	retry    time.Duration // a refused context's retry_after
	end      time.Time
	finished bool
	done     chan struct{}
}

func (c *wsCtx) finish(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finished {
		return
	}
	c.finished, c.err, c.end = true, key, now
	close(c.done)
}

func (c *wsCtx) onAudio(now time.Time, secs float64, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += int64(n)
	if c.ttfb == 0 {
		c.ttfb = now.Sub(c.start)
	} else {
		c.gaps = append(c.gaps, Ms(now.Sub(c.last)))
	}
	c.last = now
	c.audio += secs
}

// current returns a live connection, dialling if needed; otherwise why not,
// as the sample of a failed operation: an error key, or a refused handshake
// (503 upstream_busy) with its Retry-After.
func (s *wsSession) current(ctx context.Context) (*wsConn, sample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil {
		s.c.mu.Lock()
		dead := s.c.dead
		s.c.mu.Unlock()
		if !dead {
			return s.c, sample{}
		}
	}
	h := http.Header{}
	h.Set("X-API-Key", s.sc.t.key)
	conn, resp, err := s.sc.dialer.DialContext(ctx, s.sc.url, h)
	if err != nil {
		var f sample
		if resp != nil {
			defer resp.Body.Close()
			if failStatus(&f, resp); f.err != "" {
				f.err = "ws:handshake_" + f.err
			}
			return nil, f
		}
		return nil, sample{err: netError(err)}
	}
	c := &wsConn{conn: conn, ctxs: map[string]*wsCtx{}, closed: make(chan struct{})}
	s.c = c
	go c.read(s.sc)
	return c, sample{}
}

// end closes the session gracefully: session_end, then wait briefly for the
// server to close so that its session count drops before the next run.
func (s *wsSession) end() {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	if c == nil {
		return
	}
	_ = c.write(map[string]any{"type": "session_end"})
	select {
	case <-c.closed:
	case <-time.After(time.Second):
	}
	_ = c.conn.Close()
	<-c.closed
}

func (c *wsConn) write(v any) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.conn.WriteJSON(v)
}

func (c *wsConn) register(id string, ctx *wsCtx) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return false
	}
	c.ctxs[id] = ctx
	return true
}

func (c *wsConn) lookup(id string) *wsCtx {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ctxs[id]
}

// kill marks the connection dead and fails every context still open on it.
func (c *wsConn) kill(key string, now time.Time) {
	c.mu.Lock()
	c.dead = true
	ctxs := c.ctxs
	c.ctxs = map[string]*wsCtx{}
	c.mu.Unlock()
	for _, x := range ctxs {
		x.finish(key, now)
	}
	_ = c.conn.Close()
}

// read is the connection's only reader. Timestamps are taken at receipt so
// that dispatch costs do not leak into TTFB and gaps.
func (c *wsConn) read(sc *wsScenario) {
	defer close(c.closed)
	var pc pairChecker
	for {
		mt, r, err := c.conn.NextReader()
		now := time.Now()
		if err != nil {
			c.kill(closeKey(err), now)
			return
		}
		var m wsMsg
		switch mt {
		case websocket.TextMessage:
			var data []byte
			if data, err = io.ReadAll(r); err != nil {
				c.kill(closeKey(err), now)
				return
			}
			m, err = pc.Text(data)
		case websocket.BinaryMessage:
			// Audio is counted, not kept: no allocation per frame.
			var n int64
			if n, err = io.Copy(io.Discard, r); err != nil {
				c.kill(closeKey(err), now)
				return
			}
			m, err = pc.Binary(int(n))
			if err == nil {
				if x := c.lookup(m.ContextID); x != nil {
					x.onAudio(now, m.AudioDurationS, int(n))
				}
				continue
			}
		default:
			continue
		}
		if err != nil {
			// Audio can no longer be attributed: fail the whole session.
			c.kill("ws:pairing", now)
			return
		}
		c.dispatch(sc, m, now)
	}
}

func (c *wsConn) dispatch(sc *wsScenario, m wsMsg, now time.Time) {
	x := c.lookup(m.ContextID)
	switch m.Type {
	case "task_started":
		if x != nil {
			x.mu.Lock()
			x.bps, x.rate = bytesPerSample(m.AudioFormat), m.SampleRate
			x.mu.Unlock()
		}
	case "task_done":
		if x != nil {
			x.mu.Lock()
			x.total = m.TotalAudioDuration
			x.srvTTFB = m.Profile.TTFBMs
			x.mu.Unlock()
			x.finish("", now)
		}
	case "task_cancelled":
		if x != nil {
			x.finish("ws:cancelled", now)
		}
	case "task_failed", "error":
		key := "ws:" + orUnknown(m.Code)
		switch {
		case x != nil:
			if m.RetryAfter > 0 {
				x.mu.Lock()
				x.retry = min(time.Duration(m.RetryAfter)*time.Second, maxRetryAfter)
				x.mu.Unlock()
			}
			x.finish(key, now)
		case m.Type == "error" && m.Fatal:
			c.kill(key, now)
		default:
			sc.addStray(key)
		}
	case "session_ended":
		c.kill("ws:session_ended_"+orUnknown(m.Reason), now)
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// closeKey names a read failure: close frames by code, the rest as network.
func closeKey(err error) string {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return fmt.Sprintf("ws:close_%d", ce.Code)
	}
	return netError(err)
}

func (sc *wsScenario) do(ctx context.Context, slot int) sample {
	s := sc.sessions[slot/sc.contexts]
	start := time.Now()
	c, f := s.current(ctx)
	if c == nil {
		f.start, f.total = start, time.Since(start)
		return f
	}
	id := fmt.Sprintf("c%d", s.seq.Add(1))
	x := &wsCtx{done: make(chan struct{})}
	if !c.register(id, x) {
		return sample{start: time.Now(), err: "ws:session_lost"}
	}
	words := []string{sc.t.text}
	if f := strings.Fields(sc.t.text); sc.stream && len(f) > 0 {
		words = f
	}
	x.mu.Lock()
	x.start = time.Now()
	x.mu.Unlock()
	err := c.write(map[string]any{
		"type": "task_start", "context_id": id, "voice_id": sc.t.voiceID, "text": words[0],
		"finalize": len(words) == 1, "output_format": sc.t.format, "sample_rate": sc.t.sampleRate,
	})
	if err == nil && len(words) > 1 {
		err = sc.streamWords(ctx, c, id, words[1:], x.done)
	}
	if err != nil {
		x.finish(netError(err), time.Now())
	}
	select {
	case <-x.done:
	case <-ctx.Done():
		_ = c.write(map[string]any{"type": "task_cancel", "context_id": id})
		x.finish("client:timeout", time.Now())
	}
	c.mu.Lock()
	delete(c.ctxs, id)
	c.mu.Unlock()

	x.mu.Lock()
	defer x.mu.Unlock()
	out := sample{start: x.start, ttfb: x.ttfb, total: x.end.Sub(x.start), gaps: x.gaps, audio: x.audio, err: x.err, serverTTFB: x.srvTTFB}
	switch {
	case x.total > 0:
		out.audio = x.total
	case out.audio == 0:
		out.audio = pcmSeconds(x.bytes, x.bps, x.rate)
	}
	switch {
	case out.err == "ws:upstream_busy" && x.ttfb == 0:
		// The engine at capacity refused the context (at once, before
		// any audio): a refusal, not a failure, retried after the
		// frame's retry_after.
		out.err, out.refused, out.retryAfter = "", true, refusalBackoff
		if x.retry > 0 {
			out.retryAfter = x.retry
		}
	case out.err == "" && x.ttfb == 0:
		out.err = "ws:no_audio"
	}
	return out
}

// streamWords sends one word per 1/tps seconds like a language model emitting
// tokens, then a finalize-only task_continue.
func (sc *wsScenario) streamWords(ctx context.Context, c *wsConn, id string, words []string, done <-chan struct{}) error {
	interval := time.Duration(float64(time.Second) / max(sc.tps, 0.1))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for _, w := range words {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case <-tick.C:
		}
		if err := c.write(map[string]any{"type": "task_continue", "context_id": id, "text": " " + w, "finalize": false}); err != nil {
			return err
		}
	}
	return c.write(map[string]any{"type": "task_continue", "context_id": id, "text": "", "finalize": true})
}
