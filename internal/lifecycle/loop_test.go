package lifecycle

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/replication"
)

// fakeReplica is a running replica whose status the test sets; the
// membership changes it receives are sent on changes.
type fakeReplica struct {
	leading bool
	removed bool
	status  replication.Status
	changes chan string
}

func (r *fakeReplica) Leader() (uint64, bool)              { return 0, r.leading }
func (r *fakeReplica) Removed() bool                       { return r.removed }
func (r *fakeReplica) Status() (replication.Status, error) { return r.status, nil }
func (r *fakeReplica) Rebuilding(uint64) bool              { return false }
func (r *fakeReplica) AddLearner(_ context.Context, id uint64) error {
	return r.note("add learner", id)
}
func (r *fakeReplica) Promote(_ context.Context, id uint64) error { return r.note("promote", id) }
func (r *fakeReplica) TransferLeadership(_ context.Context, id uint64) error {
	return r.note("transfer", id)
}
func (r *fakeReplica) RemoveReplica(_ context.Context, id uint64) error { return r.note("remove", id) }

func (r *fakeReplica) note(change string, id uint64) error {
	r.changes <- change + " " + uintName(id)
	return nil
}

func uintName(id uint64) string { return string(rune('a' + id - 1)) }

// fakeHost records the steps the loop carries out, in order.
type fakeHost struct {
	mu      sync.Mutex
	placed  []Placed
	hosted  map[Partition]Replica
	onDisk  map[Partition]uint64
	reports map[Partition]*Report
	done    []string
}

func (h *fakeHost) record(what string, p Partition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.done = append(h.done, what+" "+p.DB)
}

func (h *fakeHost) Placements() []Placed { return h.placed }
func (h *fakeHost) PlacedReplicas(p Partition) ([]uint64, bool) {
	for _, pp := range h.placed {
		if pp.Partition == p {
			return pp.Replicas, true
		}
	}
	return nil, false
}
func (h *fakeHost) Hosted(p Partition) (Replica, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.hosted[p]
	return r, ok
}
func (h *fakeHost) RestartingEmpty(Partition) bool { return false }
func (h *fakeHost) Report(p Partition) *Report     { return h.reports[p] }
func (h *fakeHost) Nodes() map[uint64]Node         { return live(self, b, c, d) }
func (h *fakeHost) NodeName(raft uint64) string    { return uintName(raft) }
func (h *fakeHost) OnDisk() map[Partition]uint64   { return h.onDisk }
func (h *fakeHost) DropOrphan(p Partition) error   { h.record("drop orphan", p); return nil }
func (h *fakeHost) Drop(p Partition) error         { h.record("drop", p); return nil }
func (h *fakeHost) RestartEmpty(_ context.Context, p Partition) error {
	h.record("restart empty", p)
	return nil
}
func (h *fakeHost) Start(_ context.Context, p Partition) (Replica, error) {
	h.record("start", p)
	r := &fakeReplica{}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hosted[p] = r
	return r, nil
}

func part(db string) Partition { return Partition{DB: db} }

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestReconcileTakesEachPartitionsStep checks one pass: a replica placed
// here starts, one its group dropped is deleted, one removed from its
// group yet placed here restarts empty, and an orphan placed here again
// is forgotten and started, not deleted.
func TestReconcileTakesEachPartitionsStep(t *testing.T) {
	h := &fakeHost{
		placed: []Placed{
			{Partition: part("new"), Replicas: []uint64{self, b, c}},
			{Partition: part("moved"), Replicas: []uint64{b, c, d}},
			{Partition: part("removed"), Replicas: []uint64{self, b, c}},
			{Partition: part("orphan"), Replicas: []uint64{self, b, c}},
		},
		hosted: map[Partition]Replica{
			part("moved"):   &fakeReplica{status: replication.Status{Role: replication.RoleFollower, Term: 2, AppliedIndex: 9, Voters: []uint64{b, c, d}}},
			part("removed"): &fakeReplica{removed: true},
		},
		onDisk: map[Partition]uint64{part("orphan"): 3},
	}
	l := NewLoop(h, self, quiet())
	l.FindOrphans()
	l.Reconcile(context.Background())
	slices.Sort(h.done)
	want := []string{"drop moved", "restart empty removed", "start new", "start orphan"}
	if !slices.Equal(h.done, want) {
		t.Fatalf("steps %q, want %q", h.done, want)
	}
	if len(l.orphans) != 0 {
		t.Fatalf("orphans %v, want none", l.orphans)
	}
}

// TestReconcileDropsAnOrphanOnceUnlisted checks that an orphan is deleted
// only after its leader's report has left it out for StaleAfter.
func TestReconcileDropsAnOrphanOnceUnlisted(t *testing.T) {
	h := &fakeHost{
		hosted:  map[Partition]Replica{},
		onDisk:  map[Partition]uint64{part("orphan"): 3},
		reports: map[Partition]*Report{part("orphan"): {Term: 3}},
	}
	l := NewLoop(h, self, quiet())
	l.FindOrphans()
	l.Reconcile(context.Background())
	if len(h.done) != 0 {
		t.Fatalf("first pass took %q, want nothing", h.done)
	}
	l.stale[part("orphan")] = time.Now().Add(-StaleAfter)
	l.Reconcile(context.Background())
	if want := []string{"drop orphan orphan"}; !slices.Equal(h.done, want) {
		t.Fatalf("steps %q, want %q", h.done, want)
	}
	if len(l.orphans) != 0 || len(l.stale) != 0 {
		t.Fatalf("orphans %v, stale %v: want both empty", l.orphans, l.stale)
	}
}

// TestReconcileMovesMembershipOnTheLeader checks that the leader of a
// partition changes its group one step towards the placement.
func TestReconcileMovesMembershipOnTheLeader(t *testing.T) {
	r := &fakeReplica{leading: true, changes: make(chan string, 1), status: replication.Status{
		Role: replication.RoleLeader, Term: 2, AppliedIndex: 100, Voters: []uint64{self, b, c}, Followers: map[uint64]replication.FollowerStatus{
			b: {Match: 100, Active: true}, c: {Match: 100, Active: true},
		},
	}}
	h := &fakeHost{
		placed: []Placed{{Partition: part("grow"), Replicas: []uint64{self, b, c, d}, Preferred: self}},
		hosted: map[Partition]Replica{part("grow"): r},
	}
	l := NewLoop(h, self, quiet())
	l.Reconcile(context.Background())
	select {
	case got := <-r.changes:
		if got != "add learner d" {
			t.Fatalf("change %q, want add learner d", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no membership change")
	}
}
