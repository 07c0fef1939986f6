package export

import "time"

// ManifestFormat names the manifest's layout.
const ManifestFormat = "doppio-export/1"

// Manifest is an export's manifest.json.
type Manifest struct {
	Format   string `json:"format"` // ManifestFormat
	Database string `json:"database"`
	Kind     Kind   `json:"kind"`
	// FileFormat is the rows' format: parquet, avro or jsonl.
	FileFormat string          `json:"fileFormat"`
	Tables     []ManifestTable `json:"tables"`
	// Since is the checkpoint a change export started from.
	Since string `json:"since,omitempty"`
	// Checkpoint is where the next change export (--since) starts.
	Checkpoint string              `json:"checkpoint"`
	Partitions []ManifestPartition `json:"partitions"`
	Rows       int64               `json:"rows"`
	Started    time.Time           `json:"started"`
	Finished   time.Time           `json:"finished"`
}

// ManifestTable is an exported table.
type ManifestTable struct {
	Name          string     `json:"name"`
	SchemaVersion int        `json:"schemaVersion"`
	Key           []KeyField `json:"key"`
}

// KeyField is one key part of an exported table.
type KeyField struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// ManifestPartition is one partition's part of an export.
type ManifestPartition struct {
	Partition int `json:"partition"`
	// SCN is the partition's point the export holds: the snapshot's SCN,
	// or the last SCN a change export covers.
	SCN string `json:"scn"`
	// SinceSCN is where a change export of the partition started.
	SinceSCN string `json:"sinceScn,omitempty"`
	// Source is the replica read, "node/role" ("" when nothing had to be
	// read).
	Source string         `json:"source,omitempty"`
	Rows   int64          `json:"rows"`
	Files  []ManifestFile `json:"files"`
}

// ManifestFile is one file of an export.
type ManifestFile struct {
	Table  string `json:"table"`
	Path   string `json:"path"` // relative to the export's directory
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}
