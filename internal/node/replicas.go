package node

import (
	"context"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// partRef names one partition of one database.
type partRef struct {
	db string
	p  int
}

// reconcileLoop runs the replica lifecycle loop (internal/lifecycle) on
// every change of the placement, the nodes or the catalog, until the node
// stops.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	changes, cancel := n.view.Subscribe()
	defer cancel()
	schemas, cancelSchemas := n.catalog.Subscribe()
	defer cancelSchemas()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		<-n.stop
		stop()
	}()
	n.loop.Run(ctx, changes, schemas)
}

// reconcile does one pass of the lifecycle loop. Placements (of new
// databases too) are the controller's (internal/controller).
func (n *Node) reconcile(ctx context.Context) { n.loop.Reconcile(ctx) }

// findOrphans records the replicas on disk the first pass did not start.
func (n *Node) findOrphans() { n.loop.FindOrphans() }

// lifecycleHost is the node's side of the lifecycle loop.
type lifecycleHost struct{ n *Node }

var _ lifecycle.Host = lifecycleHost{}

func toRef(p lifecycle.Partition) partRef { return partRef{p.DB, p.P} }

// Placements lists the placed partitions of the databases the catalog
// knows (one not caught up yet, or gone, is left out).
func (h lifecycleHost) Placements() []lifecycle.Placed {
	var out []lifecycle.Placed
	for db, rec := range h.n.view.Placements() {
		d, ok := h.n.catalog.Database(db)
		if !ok {
			continue
		}
		for p, pp := range rec.Partitions {
			if p >= d.Partitions {
				break
			}
			placed := lifecycle.Placed{Partition: lifecycle.Partition{DB: db, P: p}, Replicas: raftIDs(pp.Replicas)}
			if pp.Leader != "" {
				placed.Preferred = membership.RaftID(pp.Leader)
			}
			out = append(out, placed)
		}
	}
	return out
}

func (h lifecycleHost) PlacedReplicas(p lifecycle.Partition) ([]uint64, bool) {
	rec, ok := h.n.view.Placement(p.DB)
	if !ok || p.P >= len(rec.Partitions) {
		return nil, false
	}
	return raftIDs(rec.Partitions[p.P].Replicas), true
}

func (h lifecycleHost) Hosted(p lifecycle.Partition) (lifecycle.Replica, bool) {
	_, g, hosted := h.n.registry.Hosted(p.DB, p.P)
	if !hosted || g == nil {
		return nil, hosted
	}
	return g, true
}

func (h lifecycleHost) RestartingEmpty(p lifecycle.Partition) bool {
	_, ok := h.n.rebuildingHere.Load(toRef(p))
	return ok
}

func (h lifecycleHost) Report(p lifecycle.Partition) *lifecycle.Report {
	g, _, ok := h.n.view.Group(p.DB, p.P)
	if !ok {
		return nil
	}
	return &lifecycle.Report{Term: g.Term, Lists: g.Has(h.n.cfg.ID)}
}

func (h lifecycleHost) Nodes() map[uint64]lifecycle.Node {
	out := map[uint64]lifecycle.Node{}
	for _, nd := range h.n.view.Nodes() {
		out[membership.RaftID(nd.ID)] = lifecycle.Node{Leaving: nd.Leaving}
	}
	return out
}

func (h lifecycleHost) NodeName(raft uint64) string { return h.n.nodeName(raft) }

// OnDisk reads the Raft hard state of every partition of the catalog not
// hosted here; one without state (or unreadable) is left alone.
func (h lifecycleHost) OnDisk() map[lifecycle.Partition]uint64 {
	out := map[lifecycle.Partition]uint64{}
	for _, d := range h.n.catalog.Databases() {
		for p := range d.Partitions {
			if _, _, hosted := h.n.registry.Hosted(d.Name, p); hosted {
				continue
			}
			v, err := h.n.engine.Get(keys.PartitionPrefix(d.Name, p).RaftHardState())
			if err != nil {
				continue
			}
			var hs raftpb.HardState
			if err := proto.Unmarshal(v, &hs); err != nil {
				continue
			}
			out[lifecycle.Partition{DB: d.Name, P: p}] = hs.GetTerm()
		}
	}
	return out
}

func (h lifecycleHost) Start(ctx context.Context, p lifecycle.Partition) (lifecycle.Replica, error) {
	g, err := h.n.startReplica(ctx, toRef(p))
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (h lifecycleHost) RestartEmpty(ctx context.Context, p lifecycle.Partition) error {
	return h.n.rebuildReplica(ctx, keys.PartitionPrefix(p.DB, p.P))
}

func (h lifecycleHost) Drop(p lifecycle.Partition) error {
	h.n.registry.Drop(p.DB, p.P)
	err := h.n.host.Remove(keys.PartitionPrefix(p.DB, p.P))
	h.n.parts.Delete(string(keys.PartitionPrefix(p.DB, p.P)))
	h.n.reg.SetLeader(p.DB, p.P, 0)
	h.n.reg.SetGroup(p.DB, p.P, nil)
	return err
}

func (h lifecycleHost) DropOrphan(p lifecycle.Partition) error {
	prefix := keys.PartitionPrefix(p.DB, p.P)
	b := h.n.engine.NewBatch()
	b.DeleteRange(prefix, prefix.End())
	return h.n.engine.Commit(b)
}

func raftIDs(ids []string) []uint64 {
	out := make([]uint64, len(ids))
	for i, id := range ids {
		out[i] = membership.RaftID(id)
	}
	return out
}

// startReplica starts this node's Raft replica of ref and opens it for
// requests. A replica with state on disk resumes. A new one bootstraps the
// group with the database's initial placement when this node is one of
// the initial replicas and nobody leads the partition yet; otherwise it
// starts empty and waits for the leader to add it and send a snapshot.
func (n *Node) startReplica(ctx context.Context, ref partRef) (*replication.Member, error) {
	prefix := keys.PartitionPrefix(ref.db, ref.p)
	var voters []uint64
	if _, _, led := n.view.Leader(ref.db, ref.p); !led {
		ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
		initial, ok, err := n.view.InitialPlacement(ictx, ref.db)
		cancel()
		if err != nil {
			return nil, err
		}
		if ok && ref.p < len(initial.Partitions) {
			voters = initialVoters(initial.Partitions[ref.p], n.cfg.ID)
		}
	}
	n.parts.Store(string(prefix), ref)
	g, err := n.host.Start(prefix, voters)
	if err != nil {
		return nil, err
	}
	if _, err := n.registry.Open(ref.db, ref.p, g); err != nil {
		return nil, err
	}
	return g, nil
}

// initialVoters are the Raft ids of an initial placement's replicas, the
// preferred leader first (it campaigns at once), or nil if self is not
// among them.
func initialVoters(pp membership.PartitionPlacement, self string) []uint64 {
	if !slices.Contains(pp.Replicas, self) {
		return nil
	}
	var out []uint64
	if slices.Contains(pp.Replicas, pp.Leader) {
		out = append(out, membership.RaftID(pp.Leader))
	}
	for _, r := range pp.Replicas {
		if r != pp.Leader {
			out = append(out, membership.RaftID(r))
		}
	}
	return out
}

// nodeName returns the node id of a Raft member (its number if unknown).
func (n *Node) nodeName(raft uint64) string {
	if raft == n.self {
		return n.cfg.ID
	}
	if nd, ok := n.view.NodeByRaft(raft); ok {
		return nd.ID
	}
	for _, rec := range n.view.Placements() {
		for _, pp := range rec.Partitions {
			for _, r := range pp.Replicas {
				if membership.RaftID(r) == raft {
					return r
				}
			}
		}
	}
	return "raft:" + uintString(raft)
}
