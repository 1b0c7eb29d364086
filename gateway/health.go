package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// GET /healthz: the process is up and serving.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	s.writeData(ctx, fasthttp.StatusOK, jsonValue{map[string]string{"status": "ok"}})
}

// GET /readyz: the store answers and an engine is wired. 503 otherwise, so
// that a load balancer keeps traffic away until both are there.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(pctx); err != nil {
		s.log.Warn("readyz: store unreachable", "err", err)
		s.writeError(ctx, control.ErrStoreUnavailable)
		return
	}
	if s.engine == nil {
		s.writeError(ctx, control.Errorf(control.EUnavailable, "no synthesis engine"))
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, jsonValue{map[string]string{"store": "ok", "engine": s.engine.Name()}})
}
