package node

import (
	"fmt"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/schema"
)

// TestInitialPlacementSpreadsReplicasAndLeaders checks the stand-in
// placement: distinct replicas per partition, replicas and leaders spread
// evenly, the factor capped by the node count.
func TestInitialPlacementSpreadsReplicasAndLeaders(t *testing.T) {
	for _, c := range []struct{ nodes, partitions, replicas, want int }{
		{1, 8, 1, 1}, {1, 8, 3, 1}, {3, 8, 3, 3}, {3, 9, 3, 3}, {5, 16, 3, 3}, {2, 4, 5, 2},
	} {
		var nodes []membership.Node
		for i := range c.nodes {
			nodes = append(nodes, membership.Node{ID: fmt.Sprint("n", i)})
		}
		pl := initialPlacement(schema.Database{Name: "db", Partitions: c.partitions, Replicas: c.replicas}, nodes)
		replicas, leaders := map[string]int{}, map[string]int{}
		for i, pp := range pl.Partitions {
			if len(pp.Replicas) != c.want {
				t.Fatalf("%+v: partition %d has %d replicas, want %d", c, i, len(pp.Replicas), c.want)
			}
			s := slices.Clone(pp.Replicas)
			slices.Sort(s)
			if len(slices.Compact(s)) != len(pp.Replicas) {
				t.Fatalf("%+v: partition %d has a node twice: %v", c, i, pp.Replicas)
			}
			if !slices.Contains(pp.Replicas, pp.Leader) {
				t.Fatalf("%+v: partition %d leader %s not a replica", c, i, pp.Leader)
			}
			leaders[pp.Leader]++
			for _, r := range pp.Replicas {
				replicas[r]++
			}
		}
		for _, m := range []map[string]int{replicas, leaders} {
			lo, hi := c.partitions*c.want, 0
			for _, n := range nodes {
				lo, hi = min(lo, m[n.ID]), max(hi, m[n.ID])
			}
			if hi-lo > 1 {
				t.Fatalf("%+v: uneven spread %v", c, m)
			}
		}
	}
}

// TestInitialVotersPutThePreferredLeaderFirst: the first voter campaigns
// at once, so the group starts with the placement's leader.
func TestInitialVotersPutThePreferredLeaderFirst(t *testing.T) {
	pp := membership.PartitionPlacement{Replicas: []string{"a", "b", "c"}, Leader: "b"}
	got := initialVoters(pp, "c")
	want := []uint64{membership.RaftID("b"), membership.RaftID("a"), membership.RaftID("c")}
	if !slices.Equal(got, want) {
		t.Fatalf("voters = %v, want %v", got, want)
	}
	if initialVoters(pp, "d") != nil {
		t.Fatalf("a node outside the initial placement must not bootstrap")
	}
}
