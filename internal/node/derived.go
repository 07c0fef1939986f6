package node

import (
	"context"

	"github.com/doppio-db/doppio/internal/derived"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/replicas"
	"github.com/doppio-db/doppio/internal/schema"
)

// partitionTables are the tables db's partitions must know: the
// catalog's, and the stored tables of derived tables' live versions.
func (n *Node) partitionTables(db string) []*schema.Table {
	tables := n.catalog.Tables(db)
	if n.derived == nil {
		return tables
	}
	return n.derived.Tables(db, tables)
}

// derivedHosted lists this node's replicas of db for derived tables.
func (n *Node) derivedHosted(db string) []derived.Replica {
	var out []derived.Replica
	for _, rep := range n.registry.Partitions(db) {
		out = append(out, derivedReplica{rep: rep, r: n.registry, self: n.self})
	}
	return out
}

// derivedPlacement lists the placed replicas of each partition of db.
func (n *Node) derivedPlacement(db string) [][]string {
	pl, ok := n.view.Placement(db)
	if !ok {
		return nil
	}
	out := make([][]string, len(pl.Partitions))
	for i, p := range pl.Partitions {
		out[i] = p.Replicas
	}
	return out
}

// liveNodes lists the nodes registered now.
func (n *Node) liveNodes() []string {
	var out []string
	for _, nd := range n.view.Nodes() {
		out = append(out, nd.ID)
	}
	return out
}

// derivedReplica is a partition replica as derived tables check and
// delete versions in it.
type derivedReplica struct {
	rep  *partition.Replica
	r    *replicas.Registry
	self uint64
}

func (d derivedReplica) Partition() int { return d.rep.ID }

func (d derivedReplica) Leading() bool {
	_, g, ok := d.r.Hosted(d.rep.DB, d.rep.ID)
	if !ok || g.Removed() {
		return false
	}
	lead, _ := g.Leader()
	return lead == d.self
}

func (d derivedReplica) LoadDone(load string) (bool, error) {
	m, err := d.rep.LoadMark(load)
	return m.Done, err
}

func (d derivedReplica) TableEmpty(table string) (bool, error) { return d.rep.TableEmpty(table) }

func (d derivedReplica) DropTable(ctx context.Context, table string) error {
	_, err := d.rep.DropTable(ctx, table)
	return err
}
