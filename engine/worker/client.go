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

	"voicesvc/engine"
)

// Client is the parent side: a child process speaking the protocol on its
// stdin and stdout. It implements engine.Worker. When the child dies,
// requests in flight fail with engine.ErrWorkerDied and the pool starts a
// new Client.
type Client struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	wmu   sync.Mutex
	w     *bufio.Writer

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan frame
	dead    error         // set once the child's output ended
	exited  chan struct{} // closed when the reader has finished
}

var _ engine.Worker = (*Client)(nil)

// Start starts cmd (for example `voicesvc engine-worker`) and returns its
// client. cmd's Stdin and Stdout must be unset; Stderr defaults to ours.
func Start(cmd *exec.Cmd) (*Client, error) {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("engine worker: start: %w", err)
	}
	c := &Client{
		cmd: cmd, stdin: stdin, w: bufio.NewWriterSize(stdin, 16<<10),
		pending: map[uint64]chan frame{}, exited: make(chan struct{}),
	}
	go c.read(bufio.NewReaderSize(stdout, 256<<10))
	return c, nil
}

// Pid is the child's process id (tests kill it on purpose).
func (c *Client) Pid() int { return c.cmd.Process.Pid }

// read dispatches the child's frames to the requests waiting for them.
func (c *Client) read(r *bufio.Reader) {
	defer close(c.exited)
	var err error
	for {
		var f frame
		if f, err = readFrameDecoded(r); err != nil {
			break
		}
		c.mu.Lock()
		ch := c.pending[f.id]
		c.mu.Unlock()
		if ch != nil {
			ch <- f
		}
	}
	c.mu.Lock()
	c.dead = fmt.Errorf("%w: %v", engine.ErrWorkerDied, err)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

func (c *Client) send(typ byte, id uint64, payload ...[]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := writeFrame(c.w, typ, id, payload...); err != nil {
		return fmt.Errorf("%w: %v", engine.ErrWorkerDied, err)
	}
	return nil
}

// Synthesize runs req in the child. Cancelling ctx sends a cancel frame;
// the call returns once the child has acknowledged it, so the child is
// idle again when Synthesize returns.
func (c *Client) Synthesize(ctx context.Context, req engine.Request, emit func(engine.Chunk) error) error {
	payload, err := encodeRequest(req)
	if err != nil {
		return fmt.Errorf("%w: %v", engine.ErrInvalidInput, err)
	}
	ch := make(chan frame, 64)
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return c.dead
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
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
	var stopErr error // why we asked the child to stop
	for {
		select {
		case <-done:
			done = nil
			stopErr = ctx.Err()
			c.send(frameCancel, id)
			continue
		case f, ok := <-ch:
			if !ok {
				c.mu.Lock()
				err := c.dead
				c.mu.Unlock()
				return err
			}
			switch f.typ {
			case frameChunk:
				if stopErr != nil {
					continue // draining after a cancel
				}
				if err := emit(*f.chunk); err != nil {
					stopErr = err
					done = nil
					c.send(frameCancel, id)
				}
			case frameDone:
				return stopErr
			case frameError:
				if stopErr != nil {
					return stopErr
				}
				if len(f.payload) == 0 {
					return errors.New("engine worker: empty error frame")
				}
				return &remoteError{kind: f.payload[0], msg: string(f.payload[1:])}
			}
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
	err := c.cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return nil // a child that died was already reported
	}
	return err
}
