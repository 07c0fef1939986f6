package wire

import "time"

// NodeIntent is what the operator wants of a node, as the cluster recorded
// it: the body of POST /_cluster/nodes/{id}/{add|drain|remove}.
type NodeIntent struct {
	Node string `json:"node"`
	// Alive: the node's process runs and is registered.
	Alive bool `json:"alive"`
	// State is active, standby, draining or removed.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Replicas is how many partitions still place a replica on the node or
	// list it as a Raft member.
	Replicas int `json:"replicas"`
}
