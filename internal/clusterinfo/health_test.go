package clusterinfo

import (
	"testing"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/schema"
)

// TestAssessCountsUnavailableAndUnderReplicatedPartitions: a partition is
// unavailable when no live node publishes its leadership (a dead node's
// does not count), and under-replicated when its leader's configuration
// has fewer live voters than the database's replication factor.
func TestAssessCountsUnavailableAndUnderReplicatedPartitions(t *testing.T) {
	dbs := []schema.Database{{Name: "mail", Partitions: 4, Replicas: 3}, {Name: "solo", Partitions: 1, Replicas: 1}}
	all := map[string]bool{"n1": true, "n2": true, "n3": true}
	leaders := map[string]membership.Leaderships{
		"n1": {"mail": {0: 5, 1: 2}, "solo": {0: 1}},
		"n2": {"mail": {2: 3}},
		"n3": {"mail": {3: 4}},
	}
	three := []string{"n1", "n2", "n3"}
	groups := map[string]membership.Groups{
		"n1": {"mail": {0: {Term: 5, Voters: three}, 1: {Term: 2, Voters: three}}, "solo": {0: {Term: 1, Voters: []string{"n1"}}}},
		"n2": {"mail": {2: {Term: 3, Voters: []string{"n2", "n3"}}}},
		"n3": {"mail": {3: {Term: 4, Voters: three}}},
	}
	without := func(dead string) map[string]bool {
		m := map[string]bool{}
		for id := range all {
			if id != dead {
				m[id] = true
			}
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		live    map[string]bool
		leaders map[string]membership.Leaderships
		groups  map[string]membership.Groups
		want    Availability
	}{
		{"all up, one group short of a voter", all, leaders, groups, Availability{UnderReplicated: 1}},
		{"n3 dead: its partition has no leader, the others lose a voter", without("n3"), leaders, groups, Availability{Unavailable: 1, UnderReplicated: 3}},
		{"n1 dead: three partitions lost their leader, two a voter", without("n1"), leaders, groups, Availability{Unavailable: 3, UnderReplicated: 2}},
		{"nothing published yet", all, nil, nil, Availability{Unavailable: 5}},
		{"leaders without configurations count as neither", all, leaders, nil, Availability{}},
		{"a stale report of a lower term is ignored", all, leaders, map[string]membership.Groups{
			"n1": {"mail": {2: {Term: 9, Voters: three}}},
			"n2": {"mail": {2: {Term: 3, Voters: []string{"n2"}}}},
		}, Availability{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Assess(dbs, tc.live, tc.leaders, tc.groups); got != tc.want {
				t.Errorf("Assess = %+v, want %+v", got, tc.want)
			}
		})
	}
}
