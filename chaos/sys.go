package chaos

import (
	"errors"
	"syscall"
)

func errorsAs(err error, target any) bool { return errors.As(err, target) }

// smallRcvBuf sets SO_RCVBUF before connect, so the TCP window stays small.
func smallRcvBuf(n int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
		})
		if err != nil {
			return err
		}
		return serr
	}
}
