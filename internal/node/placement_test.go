package node

import (
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/membership"
)

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
