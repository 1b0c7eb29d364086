package gateway

import (
	"github.com/valyala/fasthttp"

	"voicesvc/control"
)

// GET /jobs/{id}: a clone job of the key's workspace; the data is the job
// itself (docs/api.md#get-a-job). Another workspace's job is 404 like an unknown one.
func (s *Server) getJob(ctx *fasthttp.RequestCtx, p *control.Principal) {
	id := pathID(ctx)
	if !control.ValidID(id) {
		s.writeError(ctx, errNotFound)
		return
	}
	sctx, cancel := storeCtx()
	defer cancel()
	j, err := s.store.GetJob(sctx, id)
	if err == nil && j.OrgID != p.WorkspaceID {
		err = errNotFound
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	s.writeData(ctx, fasthttp.StatusOK, (*jobData)(j))
}
