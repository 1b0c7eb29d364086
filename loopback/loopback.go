// Package loopback keeps TCP pacing off connections between two processes
// on the same machine.
//
// Linux's BBR congestion control (the default on some hosts, this project's
// CI machines among them) paces every send by its estimate of the path's
// bandwidth. A local hop carries audio in bursts with idle gaps, so the
// estimate comes out far below what loopback carries, and pacing held
// response bytes for 5-45 ms after the server had written them: with 16
// clients, speak's time to first byte had a p99 of 13-20 ms under BBR and
// 1.6 ms under CUBIC (BenchmarkSynthTTFB, same run, same code). A reverse
// proxy on the same host talks to the gateway over exactly such a hop.
// Remote peers keep the host's choice, which suits real networks.
package loopback

import (
	"net"

	"golang.org/x/sys/unix"
)

// unpaced is tried in order: CUBIC, the usual Linux default, which does not
// pace; Reno, which is always built in.
var unpaced = []string{"cubic", "reno"}

// Unpace sets an unpaced congestion control on c when it is a TCP
// connection between loopback addresses, and reports whether it did.
// Anything else, or a kernel that refuses, leaves c as it was: slower on a
// paced host, not wrong.
func Unpace(c net.Conn) bool {
	tc, ok := c.(*net.TCPConn)
	if !ok || !IsLoopback(tc.RemoteAddr()) {
		return false
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return false
	}
	set := false
	rc.Control(func(fd uintptr) {
		for _, name := range unpaced {
			if unix.SetsockoptString(int(fd), unix.IPPROTO_TCP, unix.TCP_CONGESTION, name) == nil {
				set = true
				return
			}
		}
	})
	return set
}

// IsLoopback reports whether a is a TCP address on the loopback network.
func IsLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// Listener wraps ln so that every loopback connection it accepts is
// unpaced.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		Unpace(c)
	}
	return c, err
}
