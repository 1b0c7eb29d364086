package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"voicesvc/engine"
)

// Client is the parent side: a child process speaking the protocol on its
// stdin and stdout. It implements engine.Worker. When the child dies,
// requests in flight fail with engine.ErrWorkerDied and the pool starts a
// new Client.
type Client struct {
	cmd    *exec.Cmd
	stdin  *os.File // the child's input, written through w
	stdout *os.File // the child's output, read by read
	wmu    sync.Mutex
	w      *bufio.Writer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*call
	dead    error         // set once the child's output ended
	exited  chan struct{} // closed when the reader has finished
}

// call is one request in flight. Its chunks are handed to emit on the
// reader's goroutine: a hop to the caller's goroutine per chunk cost a
// wake-up each, in the process whose turn the workers wait for. The pool's
// emit only queues the chunk, so it does not hold the reader up.
type call struct {
	emit   func(engine.Chunk) error
	mu     sync.Mutex
	stop   error      // why we asked the child to stop: its chunks are dropped
	result chan error // the done (nil) or error frame, or the child's death
}

// stopWith records the first reason to stop; it reports whether it was.
func (cl *call) stopWith(err error) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.stop != nil {
		return false
	}
	cl.stop = err
	return true
}

func (cl *call) stopped() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.stop
}

var _ engine.Worker = (*Client)(nil)

// Start starts cmd (for example `voicesvc engine-worker`) and returns its
// client. cmd's Stdin and Stdout must be unset; Stderr defaults to ours.
func Start(cmd *exec.Cmd) (*Client, error) {
	if cmd.Stdin != nil || cmd.Stdout != nil {
		return nil, errors.New("engine worker: Stdin and Stdout must be unset")
	}
	// Our own pipes rather than exec's: this side's ends are then files we
	// hold, read and written through the poller without announcing the
	// calls (rawPipe).
	childIn, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stdout, childOut, err := os.Pipe()
	if err != nil {
		childIn.Close()
		stdin.Close()
		return nil, err
	}
	cmd.Stdin, cmd.Stdout = childIn, childOut
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	err = cmd.Start()
	childIn.Close() // the child has its copies
	childOut.Close()
	if err != nil {
		stdin.Close()
		stdout.Close()
		return nil, fmt.Errorf("engine worker: start: %w", err)
	}
	growPipe(stdout)
	// Below this process in the scheduler: the workers can keep every
	// core busy rendering, and this process (the gateway, reading their
	// output, writing every chunk to its listener, answering refusals and
	// dispatching their next sentences) must not wait for a core behind
	// them. Failure leaves it equal: slower, not wrong.
	unix.Setpriority(unix.PRIO_PROCESS, cmd.Process.Pid, workerNice())
	c := &Client{
		cmd: cmd, stdin: stdin, stdout: stdout, w: bufio.NewWriterSize(rawOrFile(stdin), 16<<10),
		pending: map[uint64]*call{}, exited: make(chan struct{}),
	}
	go c.read(bufio.NewReaderSize(rawOrFile(stdout), 256<<10))
	return c, nil
}

// rawOrFile is f as a rawPipe when it is pollable, else f itself.
func rawOrFile(f *os.File) io.ReadWriter {
	if p := newRawPipe(f); p != nil {
		return p
	}
	return f
}

// Pid is the child's process id (tests kill it on purpose).
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// read dispatches the child's frames to the requests they belong to.
func (c *Client) read(r *bufio.Reader) {
	defer close(c.exited)
	var err error
	for {
		var f frame
		if f, err = readFrame(r); err != nil {
			break
		}
		c.mu.Lock()
		cl := c.pending[f.id]
		c.mu.Unlock()
		if cl == nil {
			continue
		}
		switch f.typ {
		case frameChunk:
			if cl.stopped() != nil {
				continue // draining after a cancel
			}
			if err := cl.emit(*f.chunk); err != nil && cl.stopWith(err) {
				c.send(frameCancel, f.id)
			}
		case frameDone:
			cl.result <- nil
		case frameError:
			if len(f.payload) == 0 {
				cl.result <- errors.New("engine worker: empty error frame")
			} else {
				cl.result <- &remoteError{kind: f.payload[0], msg: string(f.payload[1:])}
			}
		}
	}
	c.mu.Lock()
	c.dead = fmt.Errorf("%w: %v", engine.ErrWorkerDied, err)
	for id, cl := range c.pending {
		select {
		case cl.result <- c.dead:
		default: // it has its answer already
		}
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *Client) send(typ byte, id uint64, payload ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := writeFrame(c.w, typ, id, payload...)
	if err == nil {
		err = c.w.Flush()
	}
	if err != nil {
		return fmt.Errorf("%w: %v", engine.ErrWorkerDied, err)
	}
	return nil
}

// Synthesize runs req in the child; emit is called on the client's reader
// goroutine, one chunk at a time, and must not block for long. Cancelling
// ctx sends a cancel frame; the call returns once the child has
// acknowledged it, so the child is idle again when Synthesize returns.
func (c *Client) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	payload, err := encodeRequest(req)
	if err != nil {
		return fmt.Errorf("%w: %v", engine.ErrInvalidInput, err)
	}
	cl := &call{emit: emit, result: make(chan error, 1)}
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return c.dead
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := c.send(frameRequest, id, payload); err != nil {
		return err
	}
	done := ctx.Done()
	for {
		select {
		case <-done:
			done = nil
			if cl.stopWith(ctx.Err()) {
				c.send(frameCancel, id)
			}
		case err := <-cl.result:
			if errors.Is(err, engine.ErrWorkerDied) {
				return err
			}
			if stop := cl.stopped(); stop != nil {
				return stop
			}
			return err
		}
	}
}

// Close ends the child: its stdin is closed so it exits by itself; one
// that has not after a grace period is killed.
func (c *Client) Close() error {
	c.stdin.Close()
	select {
	case <-c.exited:
	case <-time.After(2 * time.Second):
		c.cmd.Process.Kill()
		<-c.exited
	}
	c.stdout.Close()
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // a child that died was already reported
	}
	return err
}

// Depth is the engine.PoolOptions.WorkerDepth for pools of Clients.
const Depth = 3

// workerNiceBelow is how many nice steps below this process the children
// run. Measured at three times espeak-ng's capacity on 2 cores (5,400
// realtime streams, the bench on the same cores): 5 below, refusals of new
// streams took p50 0.9-1.3 ms and p99 7-8.5 ms; 10 below halved p50 (0.5-0.7
// ms) and took p99 to 5.7-6.8 ms, but the renderers then lost to the
// gateway and the bench often enough that the engine carried 4-6% fewer
// realtime streams (about 1,700 where it carried 1,790). Capacity wins;
// the refusals are well within their 10 ms either way.
const workerNiceBelow = 5

// workerNice is the nice value workers get: workerNiceBelow below this
// process's own (the starting thread's: Linux keeps nice per thread, and
// they are all the process's unless someone changed one), at most 19.
func workerNice() int {
	own := 0
	// getpriority(2) answers 20 - nice on Linux.
	if p, err := unix.Getpriority(unix.PRIO_PROCESS, 0); err == nil {
		own = 20 - p
	}
	return min(own+workerNiceBelow, 19)
}

// pipeSize is the capacity asked for the child's output pipe: a sentence
// is a few hundred KB of samples, and with the default 64 KiB the child
// blocked on its writes whenever this process waited for a core (which,
// with every core rendering, is often), idling a quarter of its time.
const pipeSize = 1 << 20

// growPipe raises the pipe's capacity towards pipeSize (Linux
// F_SETPIPE_SZ; an unprivileged process gets at most
// /proc/sys/fs/pipe-max-size). Failure leaves the default: slower, not
// wrong.
func growPipe(r io.Reader) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	conn, err := f.SyscallConn()
	if err != nil {
		return
	}
	conn.Control(func(fd uintptr) {
		for size := pipeSize; size >= 64<<10; size /= 2 {
			if _, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, size); err == nil {
				return
			}
		}
	})
}
