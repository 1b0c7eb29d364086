package netguard

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// flakyListener fails its first accepts with errs, then accepts from ln.
type flakyListener struct {
	net.Listener
	errs []error
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	return f.Listener.Accept()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func acceptErr(errno syscall.Errno) error {
	return &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
}

// Running out of descriptors (or memory, or a connection aborted before it
// was accepted) is retried until a connection comes: the server's accept
// loop never sees the error, which would end it.
func TestAcceptRetriesTemporaryErrors(t *testing.T) {
	raw := listen(t)
	errs := []error{acceptErr(syscall.EMFILE), acceptErr(syscall.ENFILE), acceptErr(syscall.ENOBUFS),
		acceptErr(syscall.ECONNABORTED), acceptErr(syscall.EMFILE)}
	logged := 0
	ln := Listen(&flakyListener{Listener: raw, errs: errs}, Options{MaxConns: 4,
		Logf: func(string, ...any) { logged++ }})
	c, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept returned %v", err)
	}
	defer s.Close()
	if ln.Retried() != int64(len(errs)) || logged != 1 || ln.Open() != 1 {
		t.Fatalf("retried %d, logged %d, open %d", ln.Retried(), logged, ln.Open())
	}
}

// A closed listener, or an error that cannot pass, is returned, and the
// slot taken for it is given back.
func TestAcceptReturnsPermanentErrors(t *testing.T) {
	raw := listen(t)
	bad := acceptErr(syscall.EBADF)
	ln := Listen(&flakyListener{Listener: raw, errs: []error{bad}}, Options{MaxConns: 1})
	if _, err := ln.Accept(); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("got %v, want EBADF", err)
	}
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	if ln.Open() != 0 {
		t.Fatalf("%d slots still taken", ln.Open())
	}
}

// At MaxConns open connections Accept waits; closing one lets the next in.
// Close wakes an Accept that waits for a slot.
func TestMaxConns(t *testing.T) {
	raw := listen(t)
	ln := Listen(raw, Options{MaxConns: 2})
	var clients []net.Conn
	for range 3 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients = append(clients, c)
	}
	a, _ := ln.Accept()
	b, _ := ln.Accept()
	third := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		third <- c
	}()
	select {
	case <-third:
		t.Fatal("a third connection was accepted over MaxConns 2")
	case <-time.After(100 * time.Millisecond):
	}
	a.Close()
	a.Close() // a second Close frees nothing more
	select {
	case c := <-third:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("no accept after a connection closed")
	}
	if ln.Open() != 2 {
		t.Fatalf("open %d", ln.Open())
	}
	b.Close()
	if ln.Open() != 1 {
		t.Fatalf("open %d after closing", ln.Open())
	}

	full := Listen(listen(t), Options{MaxConns: 1})
	c, err := net.Dial("tcp", full.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	held, _ := full.Accept()
	defer held.Close()
	done := make(chan error, 1)
	go func() { _, err := full.Accept(); done <- err }()
	full.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("waiting Accept got %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake a waiting Accept")
	}
}

// A lingering close lets a client that is still sending a large body read
// the answer written before the close, and finish sending; the slot is
// freed once the socket is closed. A plain close resets the connection:
// the client's writes fail (and an HTTP client reports ECONNRESET rather
// than the answer).
func TestLingerDeliversAnswer(t *testing.T) {
	for _, linger := range []bool{true, false} {
		raw := listen(t)
		ln := Listen(raw, Options{MaxConns: 4})
		const answer = "HTTP/1.1 413 Request Entity Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 1024)
			io.ReadFull(c, buf) // part of the request, as a server refusing by size would
			io.WriteString(c, answer)
			if linger {
				c.(*Conn).Linger()
			}
			c.Close()
		}()
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		sent := make(chan error, 1)
		go func() {
			_, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 8<<20)
			if err == nil {
				_, err = io.Copy(c, io.LimitReader(zeros{}, 8<<20))
			}
			sent <- err
		}()
		got, err := io.ReadAll(c)
		werr := <-sent
		if linger != (string(got) == answer && err == nil && werr == nil) {
			t.Errorf("linger=%v: read %q (%v), sending the body: %v", linger, got, err, werr)
		}
		c.Close()
		deadline := time.Now().Add(30 * time.Second)
		for ln.Open() != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if ln.Open() != 0 {
			t.Fatalf("linger=%v: the connection kept its slot", linger)
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func TestDefaultMaxConns(t *testing.T) {
	for limit, want := range map[uint64]int{
		0:       1024,
		1024:    768,
		4096:    3072,
		20000:   15000,
		300:     150, // a reserve of 256 would leave too little
		1 << 30: 1 << 20,
	} {
		if got := DefaultMaxConns(limit); got != want {
			t.Errorf("DefaultMaxConns(%d) = %d, want %d", limit, got, want)
		}
	}
}

// RaiseFileLimit leaves the soft limit at the hard one.
func TestRaiseFileLimit(t *testing.T) {
	got, err := RaiseFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		t.Fatal(err)
	}
	if got != r.Cur || r.Cur != r.Max || FileLimit() != got {
		t.Fatalf("limit %d, rlimit %+v", got, r)
	}
}

// An accepted connection gives its socket's raw connection (what a poller
// watches), and says so when it wraps something that has none.
func TestSyscallConn(t *testing.T) {
	l := Listen(listen(t), Options{MaxConns: 2})
	go func() {
		if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatal("an accepted connection is not a syscall.Conn")
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("fd %d: %v", fd, err)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	piped := &Conn{Conn: a, l: l}
	if _, err := piped.SyscallConn(); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("a pipe's SyscallConn: %v", err)
	}
}
