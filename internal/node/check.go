package node

import (
	"context"
	"fmt"
	"iter"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/consistency"
	"github.com/doppio-db/doppio/internal/keys"
)

// checkCluster is the consistency checker's view of this node.
type checkCluster struct{ n *Node }

func (c checkCluster) Hosted(db string, p int) (consistency.Group, bool) {
	if _, g, ok := c.n.registry.Hosted(db, p); ok {
		return g, true
	}
	return nil, false
}

func (c checkCluster) All() iter.Seq2[consistency.Ref, consistency.Group] {
	return func(yield func(consistency.Ref, consistency.Group) bool) {
		for ref, g := range c.n.hosted() {
			if !yield(consistency.Ref{DB: ref.db, Partition: ref.p}, g) {
				return
			}
		}
	}
}

func (c checkCluster) LeaderAddr(db string, p int) (string, string, bool) {
	id, _, ok := c.n.view.Leader(db, p)
	nd, known := c.n.view.Node(id)
	return id, nd.GRPC, ok && known
}

func (c checkCluster) NodeName(raft uint64) string { return c.n.nodeName(raft) }

// CheckPartition implements api.Checker.
func (c clusterView) CheckPartition(ctx context.Context, db string, p int, repair, local bool) (wire.PartitionCheck, error) {
	return c.n.checks.Partition(ctx, db, p, repair, local)
}

// CheckDatabase implements api.Checker.
func (c clusterView) CheckDatabase(ctx context.Context, db string, partitions int, repair bool) (wire.DatabaseCheck, error) {
	return c.n.checks.Database(ctx, db, partitions, repair)
}

// checkLoop runs the background consistency checks until the node stops.
func (n *Node) checkLoop() {
	defer n.wg.Done()
	ctx, cancel := n.stopContext()
	defer cancel()
	n.checks.Run(ctx)
}

// rebuildReplica restarts this node's replica of p empty, on its leader's
// word (replication.Config.OnRebuild): the router drops the old replica
// and opens the new one; the leader sends it a snapshot.
func (n *Node) rebuildReplica(ctx context.Context, p keys.Partition) error {
	v, ok := n.parts.Load(string(p))
	if !ok {
		return fmt.Errorf("partition %x is not hosted on node %s", []byte(p), n.cfg.ID)
	}
	ref := v.(partRef)
	// The reconcile pass must not start the replica meanwhile (it could
	// bootstrap it from the initial placement).
	n.rebuildingHere.Store(ref, struct{}{})
	defer n.rebuildingHere.Delete(ref)
	n.log.Warn("rebuilding replica from a snapshot (its leader found it inconsistent)", "db", ref.db, "partition", ref.p)
	n.registry.Drop(ref.db, ref.p)
	g, err := n.host.StartRebuilt(p)
	if err != nil {
		return err
	}
	_, err = n.registry.Open(ref.db, ref.p, g)
	return err
}
