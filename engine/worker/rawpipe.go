package worker

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// rawPipe reads and writes a non-blocking pipe through the runtime's
// poller, issuing the read and write calls themselves without telling the
// scheduler. A system call announced the usual way, made by a process whose
// processors were all idle a moment before (a worker between sentences, the
// gateway between chunks), wakes the runtime's monitor thread, which then
// polls every 20 us for a millisecond or more: thousands of wake-ups a
// second, each taking a core from a renderer. On a non-blocking descriptor
// these calls return at once, so nothing is lost by not announcing them.
type rawPipe struct {
	f  *os.File
	rc syscall.RawConn
}

// newRawPipe returns f as a rawPipe, or nil when f is not pollable (the
// caller then uses f as it is).
func newRawPipe(f *os.File) *rawPipe {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	return &rawPipe{f: f, rc: rc}
}

func (p *rawPipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := p.rc.Read(func(fd uintptr) bool {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
		n, errno = int(r), e
		return errno != syscall.EAGAIN
	})
	switch {
	case err != nil:
		return 0, p.closed("read")
	case errno == syscall.EINTR:
		return 0, nil // io.ReadFull and bufio retry a zero read
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: p.f.Name(), Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (p *rawPipe) Write(b []byte) (int, error) {
	written := 0
	for written < len(b) {
		var n int
		var errno syscall.Errno
		err := p.rc.Write(func(fd uintptr) bool {
			rest := b[written:]
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
			n, errno = int(r), e
			return errno != syscall.EAGAIN
		})
		switch {
		case err != nil:
			return written, p.closed("write")
		case errno == syscall.EINTR:
			continue
		case errno != 0:
			return written, &os.PathError{Op: "write", Path: p.f.Name(), Err: errno}
		}
		written += n
	}
	return written, nil
}

// closed is the error for a RawConn call that failed: with no deadlines
// set, the only cause is that the file was closed (os.File says the same).
func (p *rawPipe) closed(op string) error {
	return &os.PathError{Op: op, Path: p.f.Name(), Err: os.ErrClosed}
}
