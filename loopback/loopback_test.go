package loopback

import (
	"net"
	"os"
	"slices"
	"testing"
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
			if got := Congestion(s); !slices.Contains(unpaced, got) {
				t.Errorf("accepted loopback connection uses %q, want one of %v (host default %q)", got, unpaced, Congestion(c))
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
