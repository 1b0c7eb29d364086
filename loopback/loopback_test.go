package loopback

import (
	"net"
	"os"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestListenerUnpaces: a connection accepted over loopback runs an unpaced
// congestion control on the server's side, whatever the host's default.
func TestListenerUnpaces(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			raw, err := net.Listen(network, addr)
			if err != nil {
				if network == "tcp6" && os.Getenv("CI") == "" {
					t.Skipf("no IPv6 loopback here: %v", err)
				}
				t.Fatal(err)
			}
			ln := Listener(raw)
			defer ln.Close()
			c, err := net.Dial(network, ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			s, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := congestion(s); !slices.Contains(unpaced, got) {
				t.Errorf("accepted loopback connection uses %q, want one of %v (host default %q)", got, unpaced, congestion(c))
			}
		})
	}
}

func TestIsLoopback(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80}, true},
		{&net.TCPAddr{IP: net.IPv4(127, 3, 2, 1), Port: 80}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 80}, true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 80}, false},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 80}, false},
		{&net.UnixAddr{Name: "/tmp/s", Net: "unix"}, false},
	}
	for _, tc := range tests {
		if got := IsLoopback(tc.addr); got != tc.want {
			t.Errorf("IsLoopback(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

// congestion returns c's congestion control algorithm ("" if it cannot
// be read).
func congestion(c net.Conn) string {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return ""
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return ""
	}
	var name string
	rc.Control(func(fd uintptr) {
		name, _ = unix.GetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION)
	})
	return name
}
