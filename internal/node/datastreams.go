package node

import (
	"time"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replicas"
)

// streamCluster is the datastream manager's view of the cluster: live
// registrations and the controller's placements.
type streamCluster struct{ v *membership.View }

func (c streamCluster) Shape() datastream.Shape {
	s := datastream.Shape{Live: map[string]bool{}, Partitions: map[datastream.PartitionRef]datastream.Placement{}}
	for _, n := range c.v.Nodes() {
		s.Live[n.ID] = true
	}
	for db, rec := range c.v.Placements() {
		for p, pp := range rec.Partitions {
			s.Partitions[datastream.PartitionRef{DB: db, Partition: p}] = datastream.Placement{Nodes: pp.Replicas, Leader: pp.Leader}
		}
	}
	return s
}

func (c streamCluster) Subscribe() (<-chan struct{}, func()) { return c.v.Subscribe() }

// streamReplicas finds the replicas hosted here for datastream tasks.
type streamReplicas struct {
	r    *replicas.Registry
	self uint64 // this node's Raft id
}

func (s streamReplicas) Local(db string, p int) (changes.Log, string, bool) {
	rep, g, ok := s.r.Hosted(db, p)
	if !ok || g.Removed() {
		return nil, "", false
	}
	role := "follower"
	if lead, _ := g.Leader(); lead == s.self {
		role = "leader"
	}
	return rep, role, true
}

// FreshAt implements datastream.Freshness: the Redis sink raises the
// cache tier's watermarks to it.
func (s streamReplicas) FreshAt(db string, p int) (time.Time, bool) {
	_, g, ok := s.r.Hosted(db, p)
	if !ok || g.Removed() {
		return time.Time{}, false
	}
	return g.FreshAt(), true
}
