package api

import (
	"context"
	"net/http"
	"strings"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
)

// NodeOperator records the operator's intent for a node (the node
// implements it next to Cluster).
type NodeOperator interface {
	// SetNodeIntent applies verb (add, drain or remove) to node id and
	// returns the node's intent as recorded.
	SetNodeIntent(ctx context.Context, id, verb string) (wire.NodeIntent, error)
}

// nodeIntent serves POST /_cluster/nodes/{name}/{add|drain|remove}.
func (s *Server) nodeIntent(w http.ResponseWriter, r *http.Request, p params) error {
	op, ok := s.clusterInfo.(NodeOperator)
	if !ok {
		return problem.New(problem.NotFound, "this server manages no cluster nodes")
	}
	verb := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	out, err := op.SetNodeIntent(r.Context(), p.name, verb)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}
