package gateway

import (
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"voicesvc/netguard"
)

// hangupWatch notices a client that closes its connection while its audio
// streams, at once rather than at the next write: fasthttp learns of it only
// when a write fails, which takes a chunk or two (20-40 ms of an upstream's
// stream, more between a slow engine's sentences), and until then the engine
// or the upstream request keeps running. It waits, in the runtime's poller,
// until the socket is readable and peeks: the end of the stream or an error
// is a hangup (call gone); bytes are a next request sent ahead, which is
// left where it is, and the watch ends.
//
// stop ends the watch and waits for it; it leaves the connection's read
// deadline cleared, as fasthttp expects before its next request.
type hangupWatch struct {
	conn *net.TCPConn
	done chan struct{}
	once sync.Once
}

// watchHangup starts watching c (nil when c is not a TCP socket).
func watchHangup(c net.Conn, gone func()) *hangupWatch {
	tc := tcpConn(c)
	if tc == nil {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	w := &hangupWatch{conn: tc, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		var buf [1]byte
		hung := false
		err := rc.Read(func(fd uintptr) bool {
			n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
				return false // nothing yet: wait until readable
			case err != nil || n == 0:
				hung = true
			}
			return true
		})
		if hung || err != nil && !isTimeout(err) {
			// Not from this goroutine: gone stops the watch, which
			// waits for this goroutine to end.
			go gone()
		}
	}()
	return w
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stop ends the watch: a read deadline in the past wakes it; then the
// deadline is cleared. Callers after the first wait until it is done.
func (w *hangupWatch) stop() {
	if w == nil {
		return
	}
	w.once.Do(func() {
		w.conn.SetReadDeadline(time.Unix(1, 0))
		<-w.done
		w.conn.SetReadDeadline(time.Time{})
	})
}

// tcpConn finds the TCP socket under the server's connection wrappers.
func tcpConn(c net.Conn) *net.TCPConn {
	for range 4 {
		switch x := c.(type) {
		case *net.TCPConn:
			return x
		case *netguard.Conn:
			c = x.Conn
		default:
			return nil
		}
	}
	return nil
}
