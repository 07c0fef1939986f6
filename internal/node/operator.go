package node

import (
	"context"
	"iter"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/operator"
	"github.com/doppio-db/doppio/internal/problem"
)

// SetNodeIntent implements api.NodeOperator: the operator applies it once
// the node is open.
func (c clusterView) SetNodeIntent(ctx context.Context, id, verb string) (wire.NodeIntent, error) {
	if c.n.ops == nil {
		return wire.NodeIntent{}, problem.New(problem.Unavailable, "node %s is starting; retry", c.n.cfg.ID)
	}
	return c.n.ops.SetNodeIntent(ctx, id, verb)
}

// hostedReplicas yields the Raft groups hosted here by partition number,
// for the operator's leadership hand-off.
func (n *Node) hostedReplicas() iter.Seq2[int, operator.Replica] {
	return func(yield func(int, operator.Replica) bool) {
		for ref, g := range n.hosted() {
			if !yield(ref.p, g) {
				return
			}
		}
	}
}
