package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"voicesvc/control"
	"voicesvc/web"
)

// GET /healthz: the process is up and serving.
func (s *Server) healthz(ctx *fasthttp.RequestCtx) {
	web.WriteData(ctx, fasthttp.StatusOK, web.Marshal(map[string]string{"status": "ok"}))
}

// GET /readyz: the store answers, an engine is wired and every upstream
// engine has a replica up. 503 otherwise, so that a load balancer keeps
// traffic away until all are there. data.engines lists the upstream
// engines and the state of each replica.
func (s *Server) readyz(ctx *fasthttp.RequestCtx) {
	pctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(pctx); err != nil {
		s.log.Warn("readyz: store unreachable", "err", err)
		s.writeError(ctx, control.ErrStoreUnavailable)
		return
	}
	if s.engine == nil || s.engines == nil {
		s.writeError(ctx, control.Errorf(control.EUnavailable, "no synthesis engine"))
		return
	}
	if err := s.engines.Ready(); err != nil {
		s.writeError(ctx, &control.Error{Code: control.EUnavailable, Message: err.Error(), RetryAfter: 1})
		return
	}
	type replica struct {
		URL   string `json:"url"`
		State string `json:"state"`
	}
	type upstream struct {
		Name     string    `json:"name"`
		Type     string    `json:"type"`
		Replicas []replica `json:"replicas"`
	}
	engines := []upstream{}
	for _, st := range s.engines.Statuses() {
		u := upstream{Name: st.Name, Type: st.Type, Replicas: []replica{}}
		for _, r := range st.Replicas {
			u.Replicas = append(u.Replicas, replica{URL: r.URL, State: r.State})
		}
		engines = append(engines, u)
	}
	web.WriteData(ctx, fasthttp.StatusOK, web.Marshal(map[string]any{
		"store": "ok", "engine": s.engine.Name(), "engines": engines}))
}
