package operator

import (
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
)

func TestSuccessorIsACaughtUpLiveVoterSpreadByPartition(t *testing.T) {
	const self = 1
	live := map[uint64]membership.Node{2: {ID: "b"}, 3: {ID: "c"}, 4: {ID: "d", Leaving: true}}
	node := func(raft uint64) (membership.Node, bool) { nd, ok := live[raft]; return nd, ok }
	up := replication.FollowerStatus{Active: true}
	for _, tc := range []struct {
		name      string
		voters    []uint64
		followers map[uint64]replication.FollowerStatus
		p         int
		want      uint64
		ok        bool
	}{
		{"alone", []uint64{1}, nil, 0, 0, false},
		{"one peer", []uint64{1, 2}, map[uint64]replication.FollowerStatus{2: up}, 7, 2, true},
		{"spread even", []uint64{1, 3, 2}, map[uint64]replication.FollowerStatus{2: up, 3: up}, 0, 2, true},
		{"spread odd", []uint64{1, 3, 2}, map[uint64]replication.FollowerStatus{2: up, 3: up}, 1, 3, true},
		{"lagging", []uint64{1, 2, 3}, map[uint64]replication.FollowerStatus{2: {Active: true, Lag: lifecycle.CaughtUp + 1}, 3: up}, 0, 3, true},
		{"caught up at the bound", []uint64{1, 2}, map[uint64]replication.FollowerStatus{2: {Active: true, Lag: lifecycle.CaughtUp}}, 0, 2, true},
		{"inactive", []uint64{1, 2}, map[uint64]replication.FollowerStatus{2: {}}, 0, 0, false},
		{"no progress known", []uint64{1, 2}, nil, 0, 0, false},
		{"leaving", []uint64{1, 4}, map[uint64]replication.FollowerStatus{4: up}, 0, 0, false},
		{"not registered", []uint64{1, 5}, map[uint64]replication.FollowerStatus{5: up}, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := replication.Status{Voters: tc.voters, Followers: tc.followers}
			got, ok := successor(st, tc.p, self, node)
			if got != tc.want || ok != tc.ok {
				t.Fatalf("successor = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDrainIsRefusedWhenADatabaseWouldLackActiveNodes(t *testing.T) {
	nodes := func(ids ...string) []membership.Node {
		var out []membership.Node
		for _, id := range ids {
			out = append(out, membership.Node{ID: id})
		}
		return out
	}
	intents := func(draining ...string) membership.Intents {
		in := membership.Intents{ByNode: map[string]membership.Intent{}}
		for _, id := range draining {
			in.ByNode[id] = membership.Intent{State: membership.IntentDraining}
		}
		return in
	}
	dbs := func(replicas ...int) []schema.Database {
		var out []schema.Database
		for _, r := range replicas {
			out = append(out, schema.Database{Name: "db", Replicas: r})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		live    []membership.Node
		intents membership.Intents
		dbs     []schema.Database
		read    []string // nil: refused
	}{
		{"enough nodes", nodes("a", "b", "c", "d"), intents(), dbs(3), []string{"a", "b", "c", "d"}},
		{"too few nodes", nodes("a", "b", "c"), intents(), dbs(3), nil},
		{"another draining", nodes("a", "b", "c", "d"), intents("d"), dbs(3), nil},
		{"the largest database counts", nodes("a", "b", "c"), intents(), dbs(1, 3), nil},
		{"no replicas means one", nodes("a", "b"), intents(), dbs(0), []string{"a", "b"}},
		{"last node of a single-replica database", nodes("a"), intents(), dbs(1), nil},
		{"no database", nodes("a"), intents(), nil, []string{"a"}},
		{"draining a dead node", nodes("b", "c"), intents(), dbs(2), []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read, err := checkDrain("a", tc.live, tc.intents, tc.dbs)
			if tc.read == nil {
				if err == nil {
					t.Fatalf("drain allowed (read %v); want refused", read)
				}
				return
			}
			if err != nil {
				t.Fatalf("drain refused: %v", err)
			}
			if !slices.Equal(read, tc.read) {
				t.Fatalf("read intents of %v; want %v", read, tc.read)
			}
		})
	}
}

func TestReplicasHeldCountsPlacementsAndReportedMembersOnce(t *testing.T) {
	placements := map[string]membership.PlacementRecord{
		"db": {Placement: membership.Placement{Partitions: []membership.PartitionPlacement{{Replicas: []string{"a", "b"}}, {Replicas: []string{"b", "c"}}}}},
	}
	groups := map[string]membership.Groups{
		"b": {"db": {0: {Voters: []string{"a", "b"}}, 1: {Voters: []string{"b", "c"}, Learners: []string{"a"}}}},
		"c": {"other": {3: {Voters: []string{"c"}}}},
	}
	for _, tc := range []struct {
		node string
		want int
	}{{"a", 2}, {"b", 2}, {"c", 2}, {"d", 0}} {
		if got := replicasHeld(tc.node, placements, groups); got != tc.want {
			t.Errorf("replicasHeld(%q) = %d; want %d", tc.node, got, tc.want)
		}
	}
}
