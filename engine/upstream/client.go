package upstream

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"voicesvc/loopback"
)

// client sends a replica's requests over its own kept-alive HTTP/1.1
// connections, writing each request and reading its response on the
// caller's goroutine, with net/http's response parser.
//
// net/http's Transport writes a request from a goroutine of the
// connection's and reads the answer on another, which hands it to the
// caller over a channel: goroutine hand-offs on the way to the first audio
// byte, on a gateway whose hop over the upstream is measured in tenths of
// a millisecond (perf on the gateway at 64 streams: finish_task_switch,
// and try_to_wake_up from those channel sends, at the top). Two gateways
// in front of one upstream, the same client asking each in turn: about
// 0.05 ms less time to first byte at the median through this one. The
// request line and headers are made once per replica (requestHead), the
// body with package jsonw: the requests differ only in their bodies, and
// encoding/json, http.NewRequest and Request.Write cost another 35 us
// before the request left (stamps in the gateway at 64 streams, caches
// cold between requests: 19 to 3 us to make it, 47 to 29 us to write it).
//
// fasthttp's client also works on the caller's goroutine, but it cannot
// stop one request (no context: a cancel would wait for the upstream's
// next bytes), it reads a body with a Content-Length or none whole before
// returning even when streaming, and closing a partly read streamed body
// puts its connection back in the pool with the rest of the body unread
// (v1.58.0, transport.RoundTrip).
type client struct {
	addr    string // host:port to dial
	tls     *tls.Config
	dialer  net.Dialer
	maxIdle int
	idleFor time.Duration

	mu    sync.Mutex
	idle  []*conn // most recently used last
	sweep *time.Timer
}

// conn is one connection with its buffers.
type conn struct {
	net.Conn
	br   *bufio.Reader // reads through lr
	bw   *bufio.Writer
	lr   limitReader
	idle time.Time // when it went back to the pool
}

// limitReader reads the connection for br, failing with errHeaderTooLarge
// once n bytes were read while n is armed (not negative): how do bounds
// what the response's status line and headers may take, which
// http.ReadResponse reads without limit (an upstream sending header lines
// without end, or one endless line, took gigabytes of memory in seconds).
type limitReader struct {
	c net.Conn
	n int64 // bytes left, or -1 when not bounded
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return l.c.Read(p)
	}
	if l.n == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	k, err := l.c.Read(p)
	l.n -= int64(k)
	return k, err
}

// maxHeaderBytes bounds an answer's status line and headers. What the
// connection may deliver while they are read is that much and one buffer
// more, as br reads ahead into the body.
const maxHeaderBytes = 64 << 10

// errHeaderTooLarge: the answer's head went past maxHeaderBytes.
var errHeaderTooLarge = fmt.Errorf("the answer's headers are larger than %d KiB", maxHeaderBytes>>10)

// Buffer sizes: small bodies out, audio in; a 32 KiB read buffer takes a
// Kokoro chunk in few reads.
const (
	readBufferSize  = 32 << 10
	writeBufferSize = 4 << 10
)

// idleTimeout is below uvicorn's default keep-alive of 5 s (Kokoro-FastAPI,
// Speaches), so that we rarely reuse a connection the server is closing;
// the rare case is resent (see attemptStale).
const idleTimeout = 4 * time.Second

func newClient(u *url.URL, maxIdle int) *client {
	c := &client{
		dialer: net.Dialer{
			Timeout:   5 * time.Second, // the first-byte timeout usually ends it sooner
			KeepAlive: 30 * time.Second,
		},
		maxIdle: maxIdle,
		idleFor: idleTimeout,
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	c.addr = net.JoinHostPort(host, port)
	if u.Scheme == "https" {
		// HTTP/1.1 only: one connection per stream, so a stream whose
		// listener reads slowly holds back its own TCP window only, and
		// a cancel closes just its connection.
		c.tls = &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}}
	}
	return c
}

// exchange is one request in flight on a connection: the response is read
// from resp.Body on the caller's goroutine, and done ends it.
type exchange struct {
	c    *client
	pc   *conn
	stop func() bool // disarms the close on cancellation
	resp *http.Response
}

// request is what do sends: head, the request line and headers
// (requestHead), then Content-Length and body when there is one.
type request struct {
	method string
	head   []byte
	body   []byte
}

// requestHead is the request line and headers of a request for u, each
// line ending in CRLF, made once per replica: the requests of a replica
// differ only in their bodies, and writing the fixed part as it is saves
// building and serializing an http.Request for every sentence.
func requestHead(method string, u *url.URL, h http.Header) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, u.RequestURI(), u.Host)
	h.Write(&b) // canonical names, values without line breaks
	return b.Bytes()
}

// answerTo stands for the request when the response is parsed, which asks
// only for its method (the answer to a HEAD has no body).
var answerTo = map[string]*http.Request{
	http.MethodGet:  {Method: http.MethodGet},
	http.MethodPost: {Method: http.MethodPost},
}

// do sends req and reads the answer's status line and headers. Cancelling
// ctx closes the connection at once, which is how the upstream learns that
// nobody listens any more, and unblocks any read or write on it. reused
// says whether a kept-alive connection was used, also when do fails.
func (c *client) do(ctx context.Context, req *request) (x *exchange, reused bool, err error) {
	pc := c.get()
	reused = pc != nil
	if pc == nil {
		if pc, err = c.dial(ctx); err != nil {
			return nil, false, err
		}
	}
	x = &exchange{c: c, pc: pc}
	x.stop = context.AfterFunc(ctx, func() { pc.Close() })
	// One write: the bufio.Writer holds the whole request.
	pc.bw.Write(req.head)
	if req.body != nil {
		var n [20]byte
		pc.bw.WriteString("Content-Length: ")
		pc.bw.Write(strconv.AppendInt(n[:0], int64(len(req.body)), 10))
		pc.bw.WriteString("\r\n\r\n")
		pc.bw.Write(req.body)
	} else {
		pc.bw.WriteString("\r\n")
	}
	if err = pc.bw.Flush(); err == nil {
		pc.lr.n = maxHeaderBytes + readBufferSize
		x.resp, err = http.ReadResponse(pc.br, answerTo[req.method])
		pc.lr.n = -1
	}
	if err != nil {
		x.done(false)
		return nil, reused, err
	}
	return x, reused, nil
}

// done ends the exchange: with reuse (the body was read to its end) the
// connection goes back to the pool unless the upstream asked to close it
// or it was closed by a cancel; otherwise it is closed, and an upstream
// still sending sees the disconnect and stops rendering. The body must not
// be Closed: a body read by http.ReadResponse drains itself to the end.
func (x *exchange) done(reuse bool) {
	if x.stop() && reuse && x.resp != nil && !x.resp.Close {
		x.c.put(x.pc)
		return
	}
	x.pc.Close()
}

func (c *client) dial(ctx context.Context) (*conn, error) {
	nc, err := c.dialer.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	// An upstream on this machine is a loopback hop, where a pacing
	// congestion control (BBR) holds small writes for milliseconds:
	// package loopback turns it off there, as the server does for its own
	// accepted connections.
	loopback.Unpace(nc)
	if c.tls != nil {
		tc := tls.Client(nc, c.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	pc := &conn{Conn: nc, bw: bufio.NewWriterSize(nc, writeBufferSize), lr: limitReader{c: nc, n: -1}}
	pc.br = bufio.NewReaderSize(&pc.lr, readBufferSize)
	return pc, nil
}

// get takes the most recently used idle connection, nil when none is left
// that is younger than idleFor.
func (c *client) get() *conn {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for len(c.idle) > 0 {
		pc := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if now.Sub(pc.idle) < c.idleFor {
			return pc
		}
		pc.Close()
	}
	return nil
}

// put keeps pc for the next request, or closes it when maxIdle are kept.
func (c *client) put(pc *conn) {
	pc.idle = time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) >= c.maxIdle {
		pc.Close()
		return
	}
	c.idle = append(c.idle, pc)
	if c.sweep == nil {
		c.sweep = time.AfterFunc(c.idleFor, c.expire)
	}
}

// expire closes the connections idle for idleFor, and comes back when the
// oldest of the others is due.
func (c *client) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	n := 0
	for n < len(c.idle) && now.Sub(c.idle[n].idle) >= c.idleFor {
		c.idle[n].Close()
		n++
	}
	c.idle = append(c.idle[:0], c.idle[n:]...)
	if len(c.idle) == 0 {
		c.sweep = nil
		return
	}
	c.sweep.Reset(c.idle[0].idle.Add(c.idleFor).Sub(now))
}

// closeIdle closes the idle connections.
func (c *client) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range c.idle {
		pc.Close()
	}
	c.idle = nil
	if c.sweep != nil {
		c.sweep.Stop()
		c.sweep = nil
	}
}
