package node

import (
	"context"
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/clusterinfo"
	"github.com/doppio-db/doppio/internal/consistency"
	"github.com/doppio-db/doppio/internal/membership"

	"go.uber.org/zap"
)

// clusterView answers /_cluster and /_internal/replicas for the API.
type clusterView struct{ n *Node }

func (c clusterView) Local() wire.LocalInfo { return c.n.local() }

func (c clusterView) Info(ctx context.Context) (wire.ClusterInfo, error) {
	info := clusterinfo.Starting(c.n.cfg.ID, c.n.Addr())
	if c.n.info != nil {
		info = c.n.info.Info(ctx)
	}
	if c.n.loads != nil {
		info.Loads = c.n.loads.Active(ctx)
	}
	if c.n.derived != nil {
		info.Derived = c.n.derived.List(ctx)
	}
	clusterinfo.AddCache(&info, c.n.cacheSources(ctx), time.Now())
	info.Insecure = !c.n.sec.secure()
	return info, nil
}

// directory is the registry's view of other nodes: their peer addresses
// (membership.Node.GRPC, where internal/peer listens).
type directory struct{ v *membership.View }

func (d directory) RoutedLeader(db string, p int) (string, string, bool) {
	id, _, ok := d.v.Leader(db, p)
	if !ok {
		return "", "", false
	}
	nd, ok := d.v.Node(id)
	return id, nd.GRPC, ok
}

func (d directory) NodeByRaft(raft uint64) (string, string, bool) {
	nd, ok := d.v.NodeByRaft(raft)
	return nd.ID, nd.GRPC, ok
}

// local reports every replica hosted here with its Raft status.
func (n *Node) local() wire.LocalInfo {
	var transfers []wire.Transfer
	if n.api != nil {
		transfers = n.api.Transfers()
	}
	var hosted iter.Seq2[consistency.Ref, clusterinfo.Replica]
	if n.registry != nil {
		hosted = func(yield func(consistency.Ref, clusterinfo.Replica) bool) {
			for ref, g := range n.hosted() {
				if !yield(consistency.Ref{DB: ref.db, Partition: ref.p}, g) {
					return
				}
			}
		}
	}
	li := clusterinfo.Local(n.cfg.ID, transfers, hosted, n.checks, n.nodeName)
	if n.tier != nil {
		p := n.tier.Report(n.cfg.ID, "node")
		li.Cache = &p
	}
	return li
}

func uintString(v uint64) string { return strconv.FormatUint(v, 10) }

func quietZap() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

// Replicas answers the change stream where partition p of db lives: the
// live voters of its Raft configuration (learners may still be receiving
// a snapshot), or its placement while no configuration is reported;
// leader flagged.
func (c clusterView) Replicas(db string, p int) []api.ReplicaAddr {
	v := c.n.view
	if v == nil {
		return nil
	}
	g, _, ok := v.Group(db, p)
	ids := g.Voters
	if pl, placed := v.Placement(db); !ok && placed && p < len(pl.Partitions) {
		ids = pl.Partitions[p].Replicas
	}
	leader, _, _ := v.Leader(db, p)
	var out []api.ReplicaAddr
	for _, id := range ids {
		if nd, ok := v.Node(id); ok && !slices.ContainsFunc(out, func(a api.ReplicaAddr) bool { return a.Node == id }) {
			out = append(out, api.ReplicaAddr{Node: id, Peer: nd.GRPC, Leader: id == leader})
		}
	}
	return out
}
