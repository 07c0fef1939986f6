package node

import (
	"context"
	"time"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/schema"
)

// placeNewDatabases writes an initial placement for every database that
// has none.
//
// This is a stand-in until the placement controller (internal/controller)
// is wired in: it only creates placements, never moves replicas, and
// ignores zones. Every node runs it; the write is a create-if-absent, so
// exactly one placement per database wins.
func (n *Node) placeNewDatabases(ctx context.Context) {
	nodes := n.view.Nodes()
	if len(nodes) == 0 {
		return
	}
	for _, d := range n.catalog.Databases() {
		if _, ok := n.view.Placement(d.Name); ok {
			continue
		}
		pl := initialPlacement(d, nodes)
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		created, err := membership.CreatePlacement(wctx, n.client, etcdPrefix, d.Name, pl)
		cancel()
		if err != nil {
			n.log.Warn("initial placement", "db", d.Name, "err", err)
			continue
		}
		if created {
			n.log.Info("initial placement written", "db", d.Name, "partitions", d.Partitions, "replicas", len(pl.Partitions[0].Replicas), "nodes", len(nodes))
		}
	}
}

// initialPlacement spreads a database's replicas and leaders round-robin
// over the live nodes (sorted by id): partition i's replicas are nodes
// i, i+1, … (mod the node count), the first leads. A database asking for
// more replicas than there are nodes gets one per node.
func initialPlacement(d schema.Database, nodes []membership.Node) membership.Placement {
	r := min(max(d.Replicas, 1), len(nodes))
	pl := membership.Placement{Version: 1, Partitions: make([]membership.PartitionPlacement, d.Partitions)}
	for i := range pl.Partitions {
		reps := make([]string, r)
		for j := range reps {
			reps[j] = nodes[(i+j)%len(nodes)].ID
		}
		pl.Partitions[i] = membership.PartitionPlacement{Replicas: reps, Leader: reps[0]}
	}
	return pl
}
