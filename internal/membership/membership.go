// Package membership is the cluster's shared state in etcd that is not
// schema: which nodes are alive and where they listen, where each
// partition's replicas are placed, and which node leads each partition.
//
// Layout under the prefix (next to the catalog's db/ and table/):
//
//	{prefix}/nodes/{id}       JSON Node, under a lease: the node is alive while the key exists
//	{prefix}/placement/{db}/{n}  chunk n of db's Placement (PlacementChunk partitions), written by
//	                          the active controller: a change rewrites only the chunks it touches
//	{prefix}/leaders/{id}     JSON Leaderships: the partitions node id leads, rewritten in batches
//	{prefix}/groups/{id}      JSON Groups: the Raft configuration of each partition node id leads,
//	                          under the node's lease, written in the same batches
//
// A View caches all four and keeps them current with watches, so routing
// decisions never wait for etcd.
package membership

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Key directories under the prefix.
const (
	NodesDir     = "/nodes/"
	PlacementDir = "/placement/"
	LeadersDir   = "/leaders/"
	GroupsDir    = "/groups/"
	// DeathsDir holds when the controller found each dead node dead (RFC
	// 3339), so that a new controller continues the dead-node delay. A
	// node's registration deletes its own record: a node that comes back
	// while no controller is active, and dies again, is not judged by its
	// earlier death.
	DeathsDir = "/deaths/"
)

// Node is a node's registration.
type Node struct {
	ID      string    `json:"id"`
	HTTP    string    `json:"http"` // host:port of the REST API
	GRPC    string    `json:"grpc"` // host:port of node-to-node traffic (Raft)
	Zone    string    `json:"zone"`
	Started time.Time `json:"started"`
	// Version is the Doppio version the node runs ("" for a node older
	// than the field).
	Version string `json:"version,omitempty"`
	// Leaving: the node is shutting down and handing its leaderships
	// over; no leadership should be handed to it.
	Leaving bool `json:"leaving,omitempty"`
}

// Placement is where a database's partitions live: Partitions[i] is
// partition i.
type Placement struct {
	Version    int64                `json:"version"`
	Partitions []PartitionPlacement `json:"partitions"`
}

// PartitionPlacement lists a partition's replicas (node ids) and its
// preferred leader.
type PartitionPlacement struct {
	Replicas []string `json:"replicas"`
	Leader   string   `json:"leader"`
}

// Leaderships maps database → partition → Raft term: the partitions a node
// leads.
type Leaderships map[string]map[int]uint64

// GroupReport is a partition's Raft configuration as its leader applied
// it: the placement driver's view of where the partition's replicas are.
type GroupReport struct {
	Term     uint64   `json:"term"`
	Voters   []string `json:"voters"`             // node ids
	Learners []string `json:"learners,omitempty"` // replicas being added
}

// Has reports whether node is a voter or a learner of the group.
func (g GroupReport) Has(node string) bool {
	return slices.Contains(g.Voters, node) || slices.Contains(g.Learners, node)
}

func (g GroupReport) equal(o GroupReport) bool {
	return g.Term == o.Term && slices.Equal(g.Voters, o.Voters) && slices.Equal(g.Learners, o.Learners)
}

// Groups maps database → partition → the configuration of the partitions
// a node leads.
type Groups map[string]map[int]GroupReport

// RaftID is the Raft member id of the node named id: a hash of the name,
// so every node derives the same id for a peer without coordination.
// (Collisions among a cluster's few node names are astronomically unlikely;
// 0 is reserved by Raft.)
func RaftID(id string) uint64 {
	h := xxhash.Sum64String(id)
	if h == 0 {
		h = 1
	}
	return h
}

func decode[T any](b []byte) (T, error) {
	var v T
	err := json.Unmarshal(b, &v)
	return v, err
}
