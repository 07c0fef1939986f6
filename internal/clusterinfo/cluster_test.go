package clusterinfo

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/membership"
)

// TestAssembleJoinsReportsWithPlacements: a partition shows its leader's
// view of its members (a member that did not report is "unknown", with
// the lag its leader sees), a placed node that is not live is dead, and
// nodes and partitions come sorted.
func TestAssembleJoinsReportsWithPlacements(t *testing.T) {
	started := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	nodes := []membership.Node{
		{ID: "b", HTTP: "hb", GRPC: "gb", Zone: "z2", Started: started},
		{ID: "a", HTTP: "ha", GRPC: "ga", Zone: "z1", Started: started},
	}
	intent := func(id string) membership.Intent {
		if id == "b" {
			return membership.Intent{State: membership.IntentDraining}
		}
		return membership.Intent{State: membership.IntentActive}
	}
	placements := map[string]membership.PlacementRecord{
		"db": {Placement: membership.Placement{Partitions: []membership.PartitionPlacement{
			{Replicas: []string{"a", "b", "c"}},
			{Replicas: []string{"b"}},
		}}},
	}
	reports := []wire.LocalInfo{
		{Node: "a", Replicas: []wire.LocalReplica{{
			Database: "db", Partition: 0, Role: "leader", Term: 4, Leader: "a", SCN: "4.9", Applied: 12,
			Voters:    []string{"a", "b", "c"},
			Followers: map[string]wire.FollowerReport{"b": {Lag: 2}, "c": {Lag: 7}},
		}}, Transfers: []wire.Transfer{{}}},
		{Node: "b", Replicas: []wire.LocalReplica{
			{Database: "db", Partition: 0, Role: "follower", Term: 4, SCN: "4.8", Applied: 10},
			{Database: "db", Partition: 1, Role: "candidate", Term: 3},
		}},
	}
	got, err := json.Marshal(Assemble(nodes, intent, placements, reports))
	if err != nil {
		t.Fatal(err)
	}
	lag := func(v uint64) *uint64 { return &v }
	want := wire.ClusterInfo{
		Nodes: []wire.NodeInfo{
			{ID: "a", HTTP: "ha", GRPC: "ga", Zone: "z1", State: "alive", Started: &started, Intent: "active", Leads: 1},
			{ID: "b", HTTP: "hb", GRPC: "gb", Zone: "z2", State: "alive", Started: &started, Intent: "draining", Follows: 2},
			{ID: "c", State: "dead", Intent: "active"},
		},
		Partitions: []wire.PartitionInfo{
			{Database: "db", Partition: 0, Replicas: []string{"a", "b", "c"}, Leader: "a", Term: 4, SCN: "4.9", Members: []wire.ReplicaInfo{
				{Node: "a", Role: "leader", SCN: "4.9", Applied: 12, Lag: lag(0)},
				{Node: "b", Role: "follower", SCN: "4.8", Applied: 10, Lag: lag(2)},
				{Node: "c", Role: "unknown", Lag: lag(7)},
			}},
			{Database: "db", Partition: 1, Replicas: []string{"b"}, Term: 3, Members: []wire.ReplicaInfo{
				{Node: "b", Role: "candidate"},
			}},
		},
		Transfers: []wire.TransferInfo{{Node: "a"}},
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(wantJSON) {
		t.Fatalf("assembled\n%s\nwant\n%s", got, wantJSON)
	}
}

// TestAssembleFlagsMixedVersions: each live node shows the version it
// registered, and the cluster is flagged once two live nodes differ.
func TestAssembleFlagsMixedVersions(t *testing.T) {
	for _, tc := range []struct {
		versions []string
		mixed    bool
	}{
		{[]string{"1.2.0", "1.2.0"}, false},
		{[]string{"1.2.0", "1.3.0"}, true},
		{[]string{"1.2.0", ""}, true}, // a node older than the version field
	} {
		nodes := []membership.Node{{ID: "a", Version: tc.versions[0]}, {ID: "b", Version: tc.versions[1]}}
		got := Assemble(nodes, func(string) membership.Intent { return membership.Intent{} }, nil, nil)
		if got.MixedVersions != tc.mixed {
			t.Errorf("versions %q: mixedVersions %t, want %t", tc.versions, got.MixedVersions, tc.mixed)
		}
		for i, n := range got.Nodes {
			if n.Version != tc.versions[i] {
				t.Errorf("versions %q: node %s shows %q", tc.versions, n.ID, n.Version)
			}
		}
	}
}
