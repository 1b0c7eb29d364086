// Package netpoll tells when idle sockets have input, with one goroutine
// for all of them, so that a connection that is waiting for its peer needs
// no goroutine of its own.
//
// Go's own network poller wakes a goroutine parked in a read: a server
// that keeps thousands of mostly silent WebSocket sessions (docs/realtime.md)
// would keep as many goroutines, each with its stack (4-8 KiB), only to
// wait. Here a socket is registered with one epoll instance that one
// goroutine waits on (while at least one socket is watched), and its owner
// is called when the socket becomes readable; the owner then reads what is
// there on a goroutine of its own, and re-arms the watch once it has
// nothing more to read. That goroutine waits for the set in Go's poller
// (the set is itself a readable descriptor), so the scheduler wakes it as
// it wakes any reader.
//
// Watches are one-shot and level-triggered (EPOLLONESHOT without
// EPOLLET): a socket fires once, and stays quiet until Arm; Arm on a
// socket that still has input fires again at once, so input that arrives
// between the owner's last read and its Arm is never missed.
//
// The descriptor stays registered with Go's own poller too (an fd may be
// in several epoll sets): deadlines, writes and blocking reads through the
// net.Conn work as before. Every system call on the descriptor goes
// through its syscall.RawConn, so a connection closed meanwhile is never
// confused with a descriptor reused by another one.
package netpoll

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by Watch and Arm once the Poller is closed.
var ErrClosed = errors.New("netpoll: poller closed")

// Poller is one epoll instance and the goroutine that waits on it.
type Poller struct {
	epfd int
	file *os.File        // owns epfd; in Go's poller
	rc   syscall.RawConn // file's
	wake int             // an eventfd in the set: written by Stop and Close to wake run

	// Every use of the descriptors but run's holds life for reading and
	// checks closed first, so that none can be closed (and their numbers
	// reused) under it.
	life   sync.RWMutex
	closed atomic.Bool // stored under life's write lock; run reads it without

	mu      sync.Mutex
	watches map[uint64]func() // by id: the owners' ready funcs
	nextID  uint64
	running bool // run is waiting on epfd (only while watches is not empty)
	fdsOpen bool
}

// wakeID marks the eventfd's events; watch ids start at 1.
const wakeID = 0

// armed are the events a watch waits for: input, the peer's end of the
// stream, and (always reported by epoll) errors and hang-ups.
const armed = unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT

// New makes a Poller. It holds two descriptors until Close and no
// goroutine while it watches nothing.
func New() (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN}
	setID(&ev, wakeID)
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &ev); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	// run waits for the set in Go's own poller (an epoll set is readable
	// while it has events), not in a blocking epoll_wait: a goroutine in a
	// system call keeps its P until the runtime's monitor takes it back
	// (up to milliseconds on a busy machine), and the reader it had just
	// started waited that long behind it; cancel latency doubled.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(wake)
		unix.Close(epfd)
		return nil, os.NewSyscallError("fcntl", err)
	}
	file := os.NewFile(uintptr(epfd), "epoll")
	rc, err := file.SyscallConn()
	if err != nil {
		unix.Close(wake)
		file.Close()
		return nil, err
	}
	return &Poller{epfd: epfd, file: file, rc: rc, wake: wake, watches: map[uint64]func(){}, fdsOpen: true}, nil
}

// Watch is one registered socket.
type Watch struct {
	p  *Poller
	id uint64
	rc syscall.RawConn
}

// Watch registers the socket of rc, armed: ready is called once, on the
// poller's goroutine, when the socket has input, has been shut down by its
// peer or has failed, and again after each Arm. ready must not block (it
// typically starts a goroutine), and may be called once more after Stop
// for an event that was already being delivered.
func (p *Poller) Watch(rc syscall.RawConn, ready func()) (*Watch, error) {
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed.Load() {
		return nil, ErrClosed
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nextID++
	w := &Watch{p: p, id: p.nextID, rc: rc}
	var err error
	cerr := rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: armed}
		setID(&ev, w.id)
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	p.watches[w.id] = ready
	if !p.running {
		p.running = true
		go p.run()
	}
	return w, nil
}

// Arm lets the watch fire again (at once if the socket has input now).
// Call it only after ready was called, once the socket has been read until
// it would block. A watch that was stopped, or whose connection is closed,
// returns an error and stays quiet.
func (w *Watch) Arm() error {
	p := w.p
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed.Load() {
		return ErrClosed
	}
	var err error
	cerr := w.rc.Control(func(fd uintptr) {
		ev := unix.EpollEvent{Events: armed}
		setID(&ev, w.id)
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, int(fd), &ev)
	})
	if cerr != nil {
		return cerr
	}
	if err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Stop unregisters the socket; call it before closing the connection (a
// closed descriptor leaves the set by itself, but its owner would stay in
// the poller's table). Stop is idempotent.
func (w *Watch) Stop() {
	p := w.p
	p.mu.Lock()
	_, ok := p.watches[w.id]
	delete(p.watches, w.id)
	last := ok && len(p.watches) == 0 && p.running
	p.mu.Unlock()
	if !ok {
		return
	}
	p.life.RLock()
	defer p.life.RUnlock()
	if p.closed.Load() {
		return
	}
	_ = w.rc.Control(func(fd uintptr) {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(fd), nil)
	})
	if last {
		p.poke() // run ends: nothing is watched
	}
}

// Watching is the number of sockets watched.
func (p *Poller) Watching() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.watches)
}

// Close stops the poller: its goroutine ends and its owners are never
// called again. The watched connections stay open; their Watch and Arm
// fail from now on.
func (p *Poller) Close() error {
	p.life.Lock()
	if p.closed.Load() {
		p.life.Unlock()
		return nil
	}
	p.closed.Store(true) // from here only run, or this, uses the descriptors
	p.life.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.watches)
	if p.running {
		p.poke() // run closes the descriptors on its way out
	} else {
		p.closeFDs()
	}
	return nil
}

func (p *Poller) poke() {
	var one = [8]byte{1}
	_, _ = unix.Write(p.wake, one[:]) // EAGAIN: already poked
}

// closeFDs runs under mu, once.
func (p *Poller) closeFDs() {
	if p.fdsOpen {
		p.fdsOpen = false
		unix.Close(p.wake)
		p.file.Close()
	}
}

// maxEvents is how many events one wait takes.
const maxEvents = 128

// run waits on the set and calls the owners of the sockets that fired. It
// ends when nothing is watched any more (a later Watch starts it again) or
// the poller is closed.
func (p *Poller) run() {
	var events [maxEvents]unix.EpollEvent
	for {
		var n int
		var err error
		rerr := p.rc.Read(func(fd uintptr) bool {
			for {
				n, err = unix.EpollWait(int(fd), events[:], 0)
				if err != unix.EINTR {
					return n > 0 || err != nil // none: wait until the set is readable
				}
			}
		})
		if err == nil {
			err = rerr
		}
		if err != nil {
			// The set is broken (or its file closed under it). Owners
			// are not called again; their idle timeouts still end them.
			p.mu.Lock()
			p.running = false
			if p.closed.Load() {
				p.closeFDs()
			}
			p.mu.Unlock()
			return
		}
		for i := range n {
			id := getID(&events[i])
			if id == wakeID {
				var b [8]byte
				_, _ = unix.Read(p.wake, b[:])
				p.mu.Lock()
				switch {
				case p.closed.Load():
					p.running = false
					p.closeFDs()
					p.mu.Unlock()
					return
				case len(p.watches) == 0:
					// Nothing watched: no goroutine waits. The next Watch
					// starts one (after this has returned or not: both
					// wait on the same set, and this one is gone next).
					p.running = false
					p.mu.Unlock()
					return
				}
				p.mu.Unlock()
				continue
			}
			p.mu.Lock()
			ready := p.watches[id]
			p.mu.Unlock()
			if ready != nil {
				ready()
			}
		}
	}
}

// An event's data is the watch's 64-bit id, in the two 32-bit halves the
// x/sys type names Fd and Pad (the epoll_data union).
func setID(ev *unix.EpollEvent, id uint64) {
	ev.Fd, ev.Pad = int32(uint32(id)), int32(uint32(id>>32))
}

func getID(ev *unix.EpollEvent) uint64 {
	return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
}
