package backupdir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client"
)

// ManifestFormat is the version of the manifest this code writes and reads.
const ManifestFormat = 1

// ManifestName is the manifest's file name in a backup's directory.
const ManifestName = "manifest.json"

// Manifest describes one backup.
type Manifest struct {
	Format      int    `json:"format"`
	ID          string `json:"id"`
	Database    string `json:"database"`
	Partitions  int    `json:"partitions"`
	Replicas    int    `json:"replicas"`
	Partitioner string `json:"partitioner"`
	// IncrementalTo is the backup this one applies on top of ("" for a
	// full backup). A partition may still be a full copy (Part.Incremental).
	IncrementalTo string    `json:"incrementalTo,omitempty"`
	Started       time.Time `json:"started"`
	Finished      time.Time `json:"finished"`
	Tables        []Table   `json:"tables"`
	Parts         []Part    `json:"parts"`
}

// Table is a table's key and every version of its document schema.
type Table struct {
	Name     string                    `json:"name"`
	Key      []client.KeyPart          `json:"key"`
	Versions []client.SchemaVersionDef `json:"versions"`
}

// Part is one partition's share of a backup.
type Part struct {
	Partition int `json:"partition"`
	// SCN is the partition's applied SCN the backup holds.
	SCN string `json:"scn"`
	// Entry is a digest of the partition's change-log entry at SCN.
	Entry       string `json:"entry,omitempty"`
	Incremental bool   `json:"incremental"`
	Since       string `json:"since,omitempty"`
	FullReason  string `json:"fullReason,omitempty"`
	Files       []File `json:"files"`
}

// File is one sstable, relative to the backup's directory.
type File struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Bytes is the size of the backup's files.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, p := range m.Parts {
		for _, f := range p.Files {
			n += f.Bytes
		}
	}
	return n
}

// ReadManifest reads the manifest of backup id in dir.
func ReadManifest(dir, id string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, id, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no backup %q in %s", id, dir)
	}
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("backup %s: manifest is not valid JSON: %w", id, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("backup %s: manifest format %d, this doppio reads %d", id, m.Format, ManifestFormat)
	}
	if m.ID != id {
		return nil, fmt.Errorf("backup %s: manifest names backup %q", id, m.ID)
	}
	if m.Partitions <= 0 || len(m.Parts) != m.Partitions {
		return nil, fmt.Errorf("backup %s: manifest lists %d partitions of %d", id, len(m.Parts), m.Partitions)
	}
	for i, p := range m.Parts {
		if p.Partition != i {
			return nil, fmt.Errorf("backup %s: manifest part %d is partition %d", id, i, p.Partition)
		}
	}
	return &m, nil
}

// List returns the complete backups in dir (those with a manifest), oldest
// first.
func List(dir string) ([]*Manifest, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Manifest
	for _, e := range ents {
		if !e.IsDir() || strings.HasSuffix(e.Name(), tmpSuffix) {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, e.Name(), ManifestName)); err != nil {
			continue
		}
		m, err := ReadManifest(dir, e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b *Manifest) int { return a.Finished.Compare(b.Finished) })
	return out, nil
}

// Chain returns the backups to restore for backup id, the full one first
// and id last, each checked: every file present with its size and SHA-256.
func Chain(dir, id string) ([]*Manifest, error) {
	var chain []*Manifest
	for cur := id; cur != ""; {
		if slices.ContainsFunc(chain, func(m *Manifest) bool { return m.ID == cur }) {
			return nil, fmt.Errorf("backup %s: the incremental chain loops at %s", id, cur)
		}
		m, err := ReadManifest(dir, cur)
		if err != nil {
			if len(chain) > 0 {
				return nil, fmt.Errorf("backup %s is incremental to %s: %w", chain[len(chain)-1].ID, cur, err)
			}
			return nil, err
		}
		if len(chain) > 0 {
			last := chain[len(chain)-1]
			if m.Database != last.Database || m.Partitions != last.Partitions {
				return nil, fmt.Errorf("backup %s is incremental to %s, a backup of another database or partition count", last.ID, m.ID)
			}
		}
		chain = append(chain, m)
		cur = m.IncrementalTo
	}
	slices.Reverse(chain)
	for _, m := range chain {
		if err := Verify(dir, m); err != nil {
			return nil, err
		}
	}
	return chain, nil
}

// Verify checks that every file of backup m is in dir with its size and
// SHA-256.
func Verify(dir string, m *Manifest) error {
	for _, p := range m.Parts {
		for _, f := range p.Files {
			if filepath.IsAbs(f.Name) || strings.Contains(f.Name, "..") {
				return fmt.Errorf("backup %s: file name %q leaves the backup", m.ID, f.Name)
			}
			path := filepath.Join(dir, m.ID, f.Name)
			sum, n, err := fileSum(path)
			if err != nil {
				return fmt.Errorf("backup %s: %w", m.ID, err)
			}
			if n != f.Bytes {
				return fmt.Errorf("backup %s: %s has %d bytes, the manifest says %d: the backup is corrupt", m.ID, f.Name, n, f.Bytes)
			}
			if sum != f.SHA256 {
				return fmt.Errorf("backup %s: %s has SHA-256 %s, the manifest says %s: the backup is corrupt", m.ID, f.Name, sum, f.SHA256)
			}
		}
	}
	return nil
}

func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
