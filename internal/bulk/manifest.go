package bulk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/doppio-db/doppio/internal/fsutil"
)

// Names and constants of a build directory.
const (
	// Format is the manifest's format tag; a loader refuses any other.
	Format = "doppio-bulk/1"
	// ManifestName is the manifest's file name inside a build directory.
	ManifestName = "manifest.json"
	// RejectsName is the rejects file's name inside a build directory.
	RejectsName = "rejects.jsonl"
	// PartitionerHash names keys.PartitionOf, the only partitioner.
	PartitionerHash = "hash"
)

// Manifest describes a finished build: what it holds and how to check it.
type Manifest struct {
	Format           string `json:"format"`
	Database         string `json:"database"`
	Table            string `json:"table"`
	SchemaVersion    int    `json:"schemaVersion"`
	Partitions       int    `json:"partitions"`
	Partitioner      string `json:"partitioner"`
	InputFingerprint string `json:"inputFingerprint"`
	Records          int64  `json:"records"`
	Rejected         int64  `json:"rejected"`
	Files            []File `json:"files"`
	Builder          string `json:"builder"`
}

// File describes one partition file of a build. FirstKey and LastKey are
// absent for an empty partition.
type File struct {
	Partition int    `json:"partition"`
	Path      string `json:"path"`
	Records   int64  `json:"records"`
	Bytes     int64  `json:"bytes"`
	SHA256    string `json:"sha256"`
	FirstKey  []byte `json:"firstKey,omitempty"`
	LastKey   []byte `json:"lastKey,omitempty"`
}

// FileName is the conventional name of partition p's file.
func FileName(p int) string { return fmt.Sprintf("p-%05d.dpb", p) }

// ErrInvalidManifest is wrapped by every error Validate and ReadManifest
// return for a manifest whose content is wrong.
var ErrInvalidManifest = errors.New("invalid bulk manifest")

// Validate checks the manifest's internal consistency: the format tag,
// one file per partition in partition order with a plain relative path,
// and record counts that add up. It does not look at the files.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidManifest, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Format != Format:
		return bad("format %q, want %q", m.Format, Format)
	case m.Database == "":
		return bad("database is empty")
	case m.Table == "":
		return bad("table is empty")
	case m.SchemaVersion < 1:
		return bad("schemaVersion %d is not positive", m.SchemaVersion)
	case m.Partitions < 1:
		return bad("partitions %d is not positive", m.Partitions)
	case m.Partitioner != PartitionerHash:
		return bad("partitioner %q, want %q", m.Partitioner, PartitionerHash)
	case m.Records < 0 || m.Rejected < 0:
		return bad("negative record counts")
	case len(m.Files) != m.Partitions:
		return bad("%d files for %d partitions", len(m.Files), m.Partitions)
	}
	var sum int64
	for i, f := range m.Files {
		switch {
		case f.Partition != i:
			return bad("files[%d] is for partition %d", i, f.Partition)
		case f.Path == "" || filepath.IsAbs(f.Path) || f.Path != filepath.Base(f.Path) || f.Path == "." || f.Path == "..":
			return bad("files[%d].path %q is not a plain file name", i, f.Path)
		case f.Records < 0 || f.Bytes < int64(len(magic))+2:
			return bad("files[%d] has %d records in %d bytes", i, f.Records, f.Bytes)
		case len(f.SHA256) != 64:
			return bad("files[%d].sha256 %q is not a hex SHA-256", i, f.SHA256)
		case (f.Records == 0) != (len(f.FirstKey) == 0) || (f.Records == 0) != (len(f.LastKey) == 0):
			return bad("files[%d] key range disagrees with its %d records", i, f.Records)
		case f.Records > 0 && bytes.Compare(f.FirstKey, f.LastKey) > 0:
			return bad("files[%d] firstKey sorts after lastKey", i)
		}
		sum += f.Records
	}
	if sum != m.Records {
		return bad("files hold %d records, manifest says %d", sum, m.Records)
	}
	return nil
}

// Marshal renders the manifest as the bytes written to manifest.json;
// a load is identified by their SHA-256, so the rendering is stable.
func (m *Manifest) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ParseManifest decodes and validates manifest bytes.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidManifest, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidManifest)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// ReadManifest reads and validates dir's manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	return ParseManifest(b)
}

// WriteManifest validates m and writes it as dir's manifest.json through a
// temporary file and a rename, so a reader sees either no manifest or the
// whole of it.
func WriteManifest(dir string, m *Manifest) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := m.Marshal()
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ManifestName+".tmp")
	if err := fsutil.WriteFileSync(tmp, b); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, ManifestName))
}
