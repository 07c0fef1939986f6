package wire

import "time"

// PartitionCheck is the outcome of one partition's consistency check, the
// body of POST /_cluster/check/{db}/{partition}.
type PartitionCheck struct {
	Database  string    `json:"database"`
	Partition int       `json:"partition"`
	Leader    string    `json:"leader,omitempty"`
	Index     uint64    `json:"index,omitempty"`
	SCN       string    `json:"scn,omitempty"`
	At        time.Time `json:"at"`
	Keys      uint64    `json:"keys"`
	Bytes     uint64    `json:"bytes"`
	Result    string    `json:"result"`
	// HandedTo: the leader differed from the majority and handed
	// leadership to this node, which rebuilt it (if that failed, the
	// check is run again there).
	HandedTo string             `json:"handedTo,omitempty"`
	Error    string             `json:"error,omitempty"`
	Replicas []ReplicaCheckInfo `json:"replicas,omitempty"`
}

// ReplicaCheckInfo is one replica's outcome in a check.
type ReplicaCheckInfo struct {
	Node        string   `json:"node"`
	Status      string   `json:"status"`
	Ranges      []string `json:"ranges,omitempty"`
	Error       string   `json:"error,omitempty"`
	Repaired    bool     `json:"repaired,omitempty"`
	RepairError string   `json:"repairError,omitempty"`
}

// DatabaseCheck is the outcome of checking every partition of a database,
// the body of POST /_cluster/check/{db}.
type DatabaseCheck struct {
	Database   string           `json:"database"`
	Result     string           `json:"result"`
	Partitions []PartitionCheck `json:"partitions"`
}

// CheckStatus is what /_cluster shows of a partition's checks (from its
// leader's node).
type CheckStatus struct {
	Running bool       `json:"running,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	// SummedBytes: of a running check, the bytes the leader has summed of
	// its own replica so far (the last check's bytes say about how many
	// there are).
	SummedBytes uint64          `json:"summedBytes,omitempty"`
	Last        *PartitionCheck `json:"last,omitempty"`
}
