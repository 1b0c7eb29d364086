package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// Draining (Server.Shutdown): from the moment a shutdown starts, requests
// that arrive are answered 503 shutting_down with Retry-After 1 and
// Connection: close, so that clients and load balancers take them
// elsewhere, while the work already running (handlers, and the streams
// they handed to fasthttp) has the grace period to finish. The listener
// stays open meanwhile: a refused connection tells a client nothing, a 503
// tells it to retry. Streams still running when the grace ends are
// cancelled with errShuttingDown and end themselves: an SSE stream with an
// error event (code shutting_down) and a clean end of its body; a raw
// audio stream, which has no way to say so, by an aborted body, so that
// its client never takes a cut stream for a whole one.

var errShuttingDown = &control.Error{Code: control.EShuttingDown,
	Message: "the server is shutting down; retry the request", RetryAfter: 1}

// closeout bounds what follows the grace: streams cancelled at its end
// writing their last event, then fasthttp closing its connections. Both
// take milliseconds; the bound is for a client that stopped reading.
const closeout = 2 * time.Second

// drainState is the server's side of a shutdown. The zero value is ready:
// nothing drains until start.
type drainState struct {
	draining atomic.Bool
	active   atomic.Int64 // requests in a handler + streams not yet closed
	route    *route       // labels refused requests; set before draining

	once   sync.Once
	ctx    context.Context // parent of every stream's context
	cancel context.CancelCauseFunc
}

func (d *drainState) init() {
	d.ctx, d.cancel = context.WithCancelCause(context.Background())
}

// streamContext is the parent of a stream's context: cancelled, with
// errShuttingDown as its cause, when the grace ends.
func (d *drainState) streamContext() context.Context {
	d.once.Do(d.init)
	return d.ctx
}

// enter counts a piece of work in; false (and nothing counted) when the
// server drains. The count is taken before draining is read, and Shutdown
// stores draining before it reads the count: one of the two always sees
// the other.
func (d *drainState) enter() bool {
	d.active.Add(1)
	if d.draining.Load() {
		d.active.Add(-1)
		return false
	}
	return true
}

func (d *drainState) leave() { d.active.Add(-1) }

// wait returns true once no work is counted, false if ctx ends first.
func (d *drainState) wait(ctx context.Context) bool {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for d.active.Load() > 0 {
		select {
		case <-ctx.Done():
			return d.active.Load() <= 0
		case <-t.C:
		}
	}
	return true
}

// cause is err, or errShuttingDown when the work ended because the grace
// did (its context, rctx, derives from streamContext).
func (d *drainState) cause(rctx context.Context, err error) error {
	if err != nil && errors.Is(context.Cause(rctx), errShuttingDown) {
		return errShuttingDown
	}
	return err
}

// serveHTTP is the server's handler: the router, behind the drain.
func (s *Server) serveHTTP(ctx *fasthttp.RequestCtx) {
	if !s.drain.enter() {
		s.refuseDraining(ctx)
		return
	}
	defer s.drain.leave()
	s.serveBody(ctx)
	if s.drain.draining.Load() {
		ctx.SetConnectionClose() // finished during the drain: no next request here
	}
}

// refuseDraining answers a request that arrived during the drain. Probes
// of the process itself (/healthz) and metric scrapes are still answered,
// on a closing connection.
func (s *Server) refuseDraining(ctx *fasthttp.RequestCtx) {
	ctx.SetConnectionClose()
	if ctx.IsGet() {
		switch string(ctx.Path()) {
		case "/healthz", "/metrics":
			s.router.Handler(ctx)
			return
		}
	}
	rt := s.drain.route
	start := reqStart(ctx)
	s.begin(ctx, rt)
	defer s.finish(ctx, rt, start)
	s.writeError(ctx, errShuttingDown)
}

// Shutdown drains the server: requests arriving from now on are refused
// (503 shutting_down), the running ones and their streams may finish until
// ctx ends, WebSocket sessions are ended alongside (wsState.shutdown, given
// the same ctx), then streams still running end with shutting_down, the
// listeners close and the change-feed goroutine stops. It returns nil when
// all of that happened, also when streams had to be cut at the end of the
// grace: they ended the way the API documents. An error means connections
// were still open when it gave up on them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	lns := s.lns
	if s.drain.route == nil {
		s.drain.route = s.newRoute("shutting_down", "", true)
	}
	s.mu.Unlock()
	s.drain.streamContext()
	s.drain.draining.Store(true)

	wsDone := make(chan struct{})
	go func() {
		defer close(wsDone)
		s.ws.shutdown(ctx) // hijacked sockets: fasthttp does not count them
	}()
	if !s.drain.wait(ctx) {
		n := s.drain.active.Load()
		s.drain.cancel(errShuttingDown)
		cctx, cancel := context.WithTimeout(context.Background(), closeout)
		ended := s.drain.wait(cctx)
		cancel()
		s.log.Warn("shutdown grace over: running work ended with shutting_down",
			"running", n, "all_ended", ended)
	}
	<-wsDone

	hctx, cancel := context.WithTimeout(context.Background(), closeout)
	err := s.http.ShutdownWithContext(hctx)
	cancel()
	for _, ln := range lns {
		ln.Close() // already closed unless Serve had not reached fasthttp yet
	}
	s.drain.cancel(errShuttingDown) // frees the context even after a clean drain
	s.stopOnce.Do(func() {
		s.stopWatch()
		<-s.watchDone
		s.closeLeases()
	})
	if err != nil {
		return errors.New("gateway: connections still open after the shutdown grace")
	}
	return nil
}
