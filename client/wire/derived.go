package wire

import "time"

// States of a derived table's version (docs/design/derived.md).
const (
	VersionFetching = "fetching" // its build is being fetched and applied on every replica
	VersionStaged   = "staged"   // every replica holds it; not yet current
	VersionCurrent  = "current"  // reads answer from it
	VersionBackup   = "backup"   // a former (or, after a rollback, later) current version, kept
	VersionFailed   = "failed"   // its fetch failed or was cancelled; never readable
	VersionDeleting = "deleting" // its data is being deleted on every replica
)

// DerivedPush is the body of POST /_derived/{db}/{table}/versions.
type DerivedPush struct {
	// Source is the build's directory, as a bulk load takes it.
	Source string `json:"source"`
	// Throttle bounds each node's applying of this version, in bytes per
	// second (0: the node's own --bulk-throttle).
	Throttle int64 `json:"throttle,omitempty"`
	// NoSwap stages the version without making it current.
	NoSwap bool `json:"noSwap,omitempty"`
	// Retain, when not 0, sets how many versions the table keeps (current
	// and backups).
	Retain int `json:"retain,omitempty"`
}

// DerivedTable is a derived table's versions: the body of GET
// /_derived/{db}/{table} and of its swaps and rollbacks.
type DerivedTable struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	// Current is the version reads answer from (0: none yet).
	Current int `json:"current"`
	// Retain is how many versions are kept: current and backups.
	Retain int `json:"retain"`
	// Announced: every live node serves this state of the table.
	Announced bool             `json:"announced"`
	Versions  []DerivedVersion `json:"versions"`
}

// DerivedVersion is one version of a derived table.
type DerivedVersion struct {
	Version int    `json:"version"`
	State   string `json:"state"`
	Source  string `json:"source"`
	// Load is the bulk load that fetches it (GET /_bulk/loads/{id}).
	Load string `json:"load"`
	// Swap: it becomes current once staged (not pushed with noSwap).
	Swap    bool      `json:"swap"`
	Error   string    `json:"error,omitempty"`
	Created time.Time `json:"created"`
	// Records and Bytes are applied so far (by the partitions' leaders)
	// out of TotalRecords and TotalBytes.
	Records      uint64 `json:"records"`
	TotalRecords uint64 `json:"totalRecords"`
	Bytes        uint64 `json:"bytes"`
	TotalBytes   uint64 `json:"totalBytes"`
	// Partitions is each partition's progress while fetching or deleting.
	Partitions []DerivedPartition `json:"partitions,omitempty"`
}

// DerivedPartition is one partition's progress in fetching or deleting
// a version.
type DerivedPartition struct {
	Partition int `json:"partition"`
	// State is the partition's state in the version's bulk load.
	State      string `json:"state"`
	Bytes      uint64 `json:"bytes"`
	TotalBytes uint64 `json:"totalBytes"`
	// Replicas are the partition's placed replicas; Ready how many of
	// them hold the version whole (fetching) or none of it (deleting).
	Replicas int `json:"replicas"`
	Ready    int `json:"ready"`
}
