package backupdir

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeBackup writes a backup of one partition with one file holding data.
func writeBackup(t *testing.T, dir, id, db, incrementalTo string, data string) *Manifest {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, id, "p0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id, "p0", "000000.sst"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(data))
	m := &Manifest{Format: ManifestFormat, ID: id, Database: db, Partitions: 1, IncrementalTo: incrementalTo, Finished: time.Now(),
		Parts: []Part{{Partition: 0, SCN: "1:1", Files: []File{{Name: "p0/000000.sst", Bytes: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}}}}}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(dir, id, ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestChainOrdersTheBackupsAndChecksEveryFile(t *testing.T) {
	dir := t.TempDir()
	writeBackup(t, dir, "b1", "db", "", "full")
	writeBackup(t, dir, "b2", "db", "b1", "inc one")
	writeBackup(t, dir, "b3", "db", "b2", "inc two")
	// An unfinished backup is not listed.
	if err := os.MkdirAll(filepath.Join(dir, "b4"+tmpSuffix), 0o755); err != nil {
		t.Fatal(err)
	}
	chain, err := Chain(dir, "b3")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range chain {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "b1,b2,b3" {
		t.Fatalf("chain %v, want b1,b2,b3", ids)
	}
	all, err := List(dir)
	if err != nil || len(all) != 3 {
		t.Fatalf("List = %d backups, %v; want 3", len(all), err)
	}

	for _, c := range []struct {
		name   string
		break_ func()
		want   string
	}{
		{"flipped byte", func() { os.WriteFile(filepath.Join(dir, "b2", "p0", "000000.sst"), []byte("inc onE"), 0o644) }, "p0/000000.sst has SHA-256"},
		{"truncated", func() { os.WriteFile(filepath.Join(dir, "b2", "p0", "000000.sst"), []byte("inc"), 0o644) }, "has 3 bytes, the manifest says 7"},
		{"missing", func() { os.Remove(filepath.Join(dir, "b2", "p0", "000000.sst")) }, "no such file"},
		{"missing link", func() { os.RemoveAll(filepath.Join(dir, "b2")) }, `backup b3 is incremental to b2: no backup "b2"`},
	} {
		c.break_()
		if _, err := Chain(dir, "b3"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Chain = %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

func TestChainRefusesAForeignOrLoopingLink(t *testing.T) {
	dir := t.TempDir()
	writeBackup(t, dir, "a1", "other", "", "x")
	writeBackup(t, dir, "b1", "db", "a1", "y")
	if _, err := Chain(dir, "b1"); err == nil || !strings.Contains(err.Error(), "another database") {
		t.Fatalf("Chain over another database's backup = %v", err)
	}
	writeBackup(t, dir, "c1", "db", "c2", "x")
	writeBackup(t, dir, "c2", "db", "c1", "y")
	if _, err := Chain(dir, "c2"); err == nil || !strings.Contains(err.Error(), "loops") {
		t.Fatalf("Chain of a loop = %v", err)
	}
	if _, err := ReadManifest(dir, "nope"); err == nil || err.Error() != `no backup "nope" in `+dir {
		t.Fatalf("ReadManifest of a missing backup = %v", err)
	}
}
