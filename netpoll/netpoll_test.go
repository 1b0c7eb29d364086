package netpoll

import (
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// pair is a loopback TCP connection: the watched end and the peer.
func pair(t *testing.T) (watched *net.TCPConn, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err = net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); peer.Close() })
	return c.(*net.TCPConn), peer
}

func rawConn(t *testing.T, c *net.TCPConn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// fired waits (bounded) for a ready call.
func fired(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: ready was not called", what)
	}
}

// notFired checks that no ready call is pending. The watch is one-shot:
// a call can only come from an event the test made, so a round trip
// through the poller (another socket's event) orders it after any such.
func notFired(t *testing.T, p *Poller, ch <-chan struct{}, what string) {
	t.Helper()
	probe, probePeer := pair(t)
	probed := make(chan struct{}, 1)
	w, err := p.Watch(rawConn(t, probe), func() { probed <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := probePeer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	fired(t, probed, "probe")
	select {
	case <-ch:
		t.Fatalf("%s: ready was called", what)
	default:
	}
}

// The watch fires once per Arm, at once when input is already there, and
// for the peer's close; Stop and Close silence it; the poller's goroutine
// exists only while something is watched.
func TestWatch(t *testing.T) {
	defer goleak.VerifyNone(t)
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, peer := pair(t)
	ready := make(chan struct{}, 4)
	w, err := p.Watch(rawConn(t, c), func() { ready <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	notFired(t, p, ready, "no input")

	if _, err := peer.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	fired(t, ready, "input")
	// One-shot: more input does not fire again before Arm.
	if _, err := peer.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	notFired(t, p, ready, "before Arm")
	// Level-triggered: arming with unread input fires at once.
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
	fired(t, ready, "Arm with unread input")
	b := make([]byte, 64)
	if n, err := c.Read(b); err != nil || n != len("hellomore") {
		t.Fatalf("read %d %v", n, err)
	}
	if err := w.Arm(); err != nil {
		t.Fatal(err)
	}
	notFired(t, p, ready, "Arm after reading everything")
	// The peer's close fires too.
	peer.Close()
	fired(t, ready, "peer closed")

	w.Stop()
	w.Stop() // idempotent
	if p.Watching() != 0 {
		t.Fatalf("watching %d after Stop", p.Watching())
	}
	if err := w.Arm(); err == nil {
		t.Fatal("Arm after Stop succeeded")
	}
	// Nothing watched: no goroutine (goleak at the end, after Close, checks
	// the closed case; this one the idle one).
	if err := goleak.Find(); err != nil {
		t.Fatalf("with nothing watched: %v", err)
	}

	// Watched again, then closed: Watch and Arm fail.
	c2, peer2 := pair(t)
	w2, err := p.Watch(rawConn(t, c2), func() { ready <- struct{}{} })
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := peer2.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := w2.Arm(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Arm after Close: %v", err)
	}
	if _, err := p.Watch(rawConn(t, c2), func() {}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
	w2.Stop()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// A watch on a closed connection cannot be made or armed, and a closed
// connection's descriptor number reused by another socket is never
// touched through the old watch.
func TestClosedConn(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, _ := pair(t)
	rc := rawConn(t, c)
	w, err := p.Watch(rc, func() {})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if err := w.Arm(); err == nil {
		t.Fatal("Arm on a closed connection succeeded")
	}
	w.Stop()
	if _, err := p.Watch(rc, func() {}); err == nil {
		t.Fatal("Watch of a closed connection succeeded")
	}
}

// Many sockets share the one goroutine; each fires for its own input.
func TestManyWatches(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const n = 50
	ready := make(chan int, n)
	peers := make([]net.Conn, n)
	for i := range n {
		c, peer := pair(t)
		peers[i] = peer
		if _, err := p.Watch(rawConn(t, c), func() { ready <- i }); err != nil {
			t.Fatal(err)
		}
	}
	for i := n - 1; i >= 0; i -= 2 {
		if _, err := peers[i].Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]bool{}
	for range n / 2 {
		select {
		case i := <-ready:
			if i%2 == 0 || got[i] {
				t.Fatalf("socket %d fired (got %v)", i, got)
			}
			got[i] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("fired %d of %d", len(got), n/2)
		}
	}
}
