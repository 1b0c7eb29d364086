package gateway

import (
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is a connected loopback pair: the server's side and the client's.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// A client that closes its socket is noticed without writing to it.
func TestHangupNoticed(t *testing.T) {
	server, client := tcpPair(t)
	gone := make(chan struct{})
	w := watchHangup(server, func() { close(gone) })
	if w == nil {
		t.Fatal("no watch on a TCP socket")
	}
	client.Close()
	select {
	case <-gone:
	case <-time.After(5 * time.Second):
		t.Fatal("the hangup was not noticed")
	}
	w.stop()
}

// Bytes sent ahead (a pipelined request) are not a hangup and stay for the
// server to read; stop leaves no read deadline behind; a stopped watch
// never calls gone.
func TestHangupLeavesRequestsAndDeadline(t *testing.T) {
	server, client := tcpPair(t)
	called := make(chan struct{}, 1)
	w := watchHangup(server, func() { called <- struct{}{} })
	client.Write([]byte("GET / HTTP/1.1\r\n"))
	time.Sleep(20 * time.Millisecond) // let the watch see the bytes (not asserted on)
	w.stop()
	buf := make([]byte, 16)
	if _, err := io.ReadFull(server, buf); err != nil || string(buf) != "GET / HTTP/1.1\r\n" {
		t.Fatalf("read after the watch: %q %v", buf, err)
	}
	// A watch stopped while nothing happened: no deadline left, no call.
	w = watchHangup(server, func() { called <- struct{}{} })
	w.stop()
	done := make(chan error, 1)
	go func() { _, err := server.Read(buf[:1]); done <- err }()
	client.Write([]byte("x"))
	if err := <-done; err != nil {
		t.Fatalf("a read after stop failed (deadline left?): %v", err)
	}
	select {
	case <-called:
		t.Fatal("gone called without a hangup")
	default:
	}
}
