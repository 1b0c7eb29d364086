// Package netguard keeps a listening server alive when clients take more
// than it has: it caps the connections open at once below the process's
// file-descriptor limit, rides out accept errors that pass (running out of
// descriptors first of all) instead of reporting them to the server, and
// closes a connection whose client may still be sending without resetting
// it, so that the client reads the answer it was sent.
//
// The HTTP library ends its accept loop on any accept error it does not
// know to be temporary, and EMFILE is not one: 1,100 idle connections to a
// server limited to 1,024 descriptors stopped it with exit status 1.
package netguard

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Options tune a Listener. Zero values take the defaults.
type Options struct {
	// MaxConns caps the connections open at once, a lingering close
	// included; beyond it Accept waits for one to close, and new clients
	// wait in the kernel's backlog. 0: DefaultMaxConns(FileLimit()).
	MaxConns int
	// Logf reports accept errors that are being retried, at most once per
	// LogEvery; nil: none.
	Logf     func(format string, args ...any)
	LogEvery time.Duration // 0: 10 s
}

// Lingering bounds a lingering close (Conn.Linger): like a web server's
// lingering close, it reads and discards what the client still sends, at
// most lingerBytes in lingerTime, giving up after lingerIdle without data.
const (
	lingerBytes = 24 << 20 // more than a whole upload (21 MiB) still in flight
	lingerTime  = 30 * time.Second
	lingerIdle  = 5 * time.Second
)

// Accept backoff after a temporary error: doubling from backoffMin to
// backoffMax, the schedule of net/http's server.
const (
	backoffMin = 5 * time.Millisecond
	backoffMax = time.Second
)

// Listener wraps a net.Listener; see the package comment.
type Listener struct {
	net.Listener
	slots    chan struct{} // one per open connection
	done     chan struct{} // closed by Close
	once     sync.Once
	logf     func(string, ...any)
	logEvery time.Duration
	lastLog  atomic.Int64 // unix nanoseconds
	retried  atomic.Int64
}

// Listen wraps ln.
func Listen(ln net.Listener, o Options) *Listener {
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns(FileLimit())
	}
	if o.LogEvery <= 0 {
		o.LogEvery = 10 * time.Second
	}
	return &Listener{Listener: ln, slots: make(chan struct{}, o.MaxConns), done: make(chan struct{}),
		logf: o.Logf, logEvery: o.LogEvery}
}

// MaxConns is the cap on open connections.
func (l *Listener) MaxConns() int { return cap(l.slots) }

// Open is the number of connections open now.
func (l *Listener) Open() int { return len(l.slots) }

// Retried counts the accept errors that were retried.
func (l *Listener) Retried() int64 { return l.retried.Load() }

// Accept waits for a free slot, then for a connection. Temporary errors
// are retried with backoff; it returns an error only once the listener is
// closed, or for an error that cannot pass (a broken socket).
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	delay := time.Duration(0)
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			return &Conn{Conn: c, l: l}, nil
		}
		if !Temporary(err) {
			<-l.slots
			return nil, err
		}
		l.retried.Add(1)
		delay = min(max(2*delay, backoffMin), backoffMax)
		if now := time.Now().UnixNano(); l.logf != nil && now-l.lastLog.Load() >= int64(l.logEvery) {
			l.lastLog.Store(now)
			l.logf("accept failed, retrying in %v (%d open connections of %d): %v",
				delay, len(l.slots), cap(l.slots), err)
		}
		select {
		case <-time.After(delay):
		case <-l.done:
			<-l.slots
			return nil, net.ErrClosed
		}
	}
}

// Close stops accepting; open connections stay open.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// Temporary reports whether an accept error passes by itself: descriptors
// or memory run out (EMFILE, ENFILE, ENOBUFS, ENOMEM), a connection was
// aborted or refused by a filter before it was accepted (ECONNABORTED,
// EPERM, EPROTO), or a timeout. A closed listener is not temporary.
func Temporary(err error) bool {
	if errors.Is(err, net.ErrClosed) {
		return false
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM,
			syscall.ECONNABORTED, syscall.ECONNRESET, syscall.EPERM, syscall.EPROTO,
			syscall.EINTR, syscall.EAGAIN:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Conn is an accepted connection; closing it frees its slot.
type Conn struct {
	net.Conn
	l      *Listener
	linger atomic.Bool
	closed atomic.Bool
	spoke  atomic.Bool // the client has sent at least one byte
}

// Read records that the client has spoken (Silent).
func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && !c.spoke.Load() {
		c.spoke.Store(true)
	}
	return n, err
}

// Silent reports whether the client has not sent a single byte yet: a
// connection opened ahead of need (HTTP clients keep spares) or by a
// scanner. Its read timeout is no failed request to answer.
func (c *Conn) Silent() bool { return !c.spoke.Load() }

// Linger makes Close a lingering close: the write side is shut (the answer
// already written reaches the client, followed by the end of the stream),
// then what the client still sends is read and dropped, within the bounds
// above, before the socket closes. A plain close of a socket with unread
// data sends a reset, and a client still writing its request body loses the
// answer it had not read yet (clients report ECONNRESET instead of the 413).
func (c *Conn) Linger() { c.linger.Store(true) }

// Close closes the connection once, lingering if asked to; the slot is
// freed when the socket is closed.
func (c *Conn) Close() error {
	if !c.closed.CompareAndSwap(false, true) {
		return nil
	}
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !c.linger.Load() || !ok || cw.CloseWrite() != nil {
		err := c.Conn.Close()
		<-c.l.slots
		return err
	}
	go func() {
		drain(c.Conn)
		c.Conn.Close()
		<-c.l.slots
	}()
	return nil
}

// SyscallConn gives the socket's raw connection, when it has one, so that
// its owner can watch it without a goroutine (package netpoll).
func (c *Conn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}

// ReadFrom lets a copy into the connection use the socket's own (sendfile,
// splice) when it has one.
func (c *Conn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(c.Conn, r)
}

// drain reads and drops input until the client closes, goes quiet for
// lingerIdle, or the bounds are reached.
func drain(c net.Conn) {
	buf := make([]byte, 16<<10)
	end := time.Now().Add(lingerTime)
	for n := 0; n < lingerBytes; {
		d := time.Now().Add(lingerIdle)
		if d.After(end) {
			d = end
		}
		if c.SetReadDeadline(d) != nil {
			return
		}
		m, err := c.Read(buf)
		n += m
		if err != nil {
			return
		}
	}
}

// FileLimit is the process's soft limit on open files; 0 if unknown.
func FileLimit() uint64 {
	var r syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r) != nil {
		return 0
	}
	return r.Cur
}

// RaiseFileLimit raises the soft limit on open files to the hard limit and
// returns the new soft limit. Connections, store files, media files and
// worker pipes all count against it; the soft limit is often 1,024 while
// the hard one allows far more.
func RaiseFileLimit() (uint64, error) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, os.NewSyscallError("getrlimit", err)
	}
	if r.Cur < r.Max {
		want := r
		want.Cur = r.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
			return r.Cur, os.NewSyscallError("setrlimit", err)
		}
		r = want
	}
	return r.Cur, nil
}

// DefaultMaxConns is the connection cap for a file limit: the limit less a
// reserve for everything else the process opens (the store and its pool,
// media files being served, upload temporary files, engine worker pipes):
// a quarter of the limit, at least 256. A limit too small for that reserve
// gives connections half of it; an unknown limit (0) gives 1,024.
func DefaultMaxConns(fileLimit uint64) int {
	if fileLimit == 0 {
		return 1024
	}
	reserve := max(fileLimit/4, 256)
	if fileLimit < 2*reserve {
		return int(max(fileLimit/2, 1))
	}
	return int(min(fileLimit-reserve, 1<<20))
}
