package wire

import "time"

// Load states: a load verifies every partition's file, then loads, then
// ends done, cancelled or failed.
const (
	LoadVerifying = "verifying"
	LoadLoading   = "loading"
	LoadDone      = "done"
	LoadCancelled = "cancelled"
	LoadFailed    = "failed"
)

// Partition states within a load.
const (
	PartPending  = "pending"  // its file is not verified yet
	PartVerified = "verified" // its file's size and checksum match the manifest
	PartLoading  = "loading"  // chunks are being applied
	PartDone     = "done"     // every record is applied
	PartSkipped  = "skipped"  // cancelled before it started: untouched
	PartFailed   = "failed"   // its file was refused: untouched
)

// Staging states of a replace load's partition that did not swap, once
// the load ended failed or cancelled: what it staged is deleted.
const (
	StagingDiscarding = "discarding" // its staged documents are being deleted
	StagingDiscarded  = "discarded"  // its staged documents are deleted
)

// LoadRequest is the body of POST /_bulk/loads.
type LoadRequest struct {
	// Source is the build's directory: a path every node can read,
	// file:///path, or an http(s):// URL.
	Source string `json:"source"`
	// Mode is "merge" (the default: loaded documents replace those with
	// the same key) or "replace" (each partition's documents of the table
	// are swapped for the loaded ones at one SCN).
	Mode string `json:"mode,omitempty"`
	// Throttle bounds each node's reading of this load's files, in bytes
	// per second (0: the node's own --bulk-throttle).
	Throttle int64 `json:"throttle,omitempty"`
}

// Load is a bulk load: the body of GET /_bulk/loads/{id} and an item of
// GET /_bulk/loads and of GET /_cluster's loads.
type Load struct {
	// ID is the SHA-256 of the build's manifest.json, in hex.
	ID            string    `json:"id"`
	Source        string    `json:"source"`
	Mode          string    `json:"mode"`
	Throttle      int64     `json:"throttle,omitempty"`
	Database      string    `json:"database"`
	Table         string    `json:"table"`
	SchemaVersion int       `json:"schemaVersion"`
	State         string    `json:"state"`
	Error         string    `json:"error,omitempty"`
	Created       time.Time `json:"created"`
	Ended         time.Time `json:"ended,omitzero"`
	Cancelled     bool      `json:"cancelled,omitempty"`
	// Totals over the partitions: what is applied and what the build holds.
	Bytes           uint64 `json:"bytes"`
	TotalBytes      uint64 `json:"totalBytes"`
	Records         uint64 `json:"records"`
	TotalRecords    uint64 `json:"totalRecords"`
	PartitionsDone  int    `json:"partitionsDone"`
	TotalPartitions int    `json:"totalPartitions"`
	// Discarding counts, in a replace load that ended failed or cancelled,
	// the partitions whose leaders have yet to delete what they staged (or
	// to find nothing staged); the load's staging is gone when it is 0.
	Discarding int `json:"discarding,omitempty"`
	// Partitions is each partition's progress, in partition order (left
	// out of GET /_cluster).
	Partitions []LoadPartition `json:"partitions,omitempty"`
}

// LoadPartition is one partition's progress in a load.
type LoadPartition struct {
	Partition    int    `json:"partition"`
	State        string `json:"state"`
	Bytes        uint64 `json:"bytes"`
	TotalBytes   uint64 `json:"totalBytes"`
	Records      uint64 `json:"records"`
	TotalRecords uint64 `json:"totalRecords"`
	// Node is the node that last drove it.
	Node  string `json:"node,omitempty"`
	Error string `json:"error,omitempty"`
	// Staging is StagingDiscarding or StagingDiscarded when the partition
	// staged documents for a replace that ended without its swap.
	Staging string `json:"staging,omitempty"`
}
