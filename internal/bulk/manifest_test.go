package bulk

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func testManifest(t *testing.T) *Manifest {
	t.Helper()
	m := &Manifest{
		Format: Format, Database: "MailboxDB", Table: "Message", SchemaVersion: 2,
		Partitions: 2, Partitioner: PartitionerHash,
		InputFingerprint: "sha256:00", Builder: "test",
	}
	for p := range 2 {
		_, f := writeFile(t, testRecords(t, 3*p))
		f.Partition, f.Path = p, FileName(p)
		m.Files = append(m.Files, f)
		m.Records += f.Records
	}
	return m
}

func TestManifestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	m := testManifest(t)
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	got, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Fatalf("read %+v, wrote %+v", got, m)
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestName+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary manifest left behind: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ManifestName))
	for _, want := range []string{`"format": "doppio-bulk/1"`, `"schemaVersion": 2`, `"path": "p-00001.dpb"`, `"firstKey": "`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("manifest lacks %s:\n%s", want, b)
		}
	}
	// An empty partition has no key range in the JSON.
	if strings.Count(string(b), `"firstKey"`) != 1 {
		t.Errorf("want one firstKey (partition 0 is empty):\n%s", b)
	}
}

func TestManifestValidateNamesTheLie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(m *Manifest)
		want   string
	}{
		{"format", func(m *Manifest) { m.Format = "doppio-bulk/2" }, `format "doppio-bulk/2", want "doppio-bulk/1"`},
		{"database", func(m *Manifest) { m.Database = "" }, "database is empty"},
		{"table", func(m *Manifest) { m.Table = "" }, "table is empty"},
		{"schema version", func(m *Manifest) { m.SchemaVersion = 0 }, "schemaVersion 0 is not positive"},
		{"partitions", func(m *Manifest) { m.Partitions = 0 }, "partitions 0 is not positive"},
		{"partitioner", func(m *Manifest) { m.Partitioner = "range" }, `partitioner "range", want "hash"`},
		{"negative", func(m *Manifest) { m.Rejected = -1 }, "negative record counts"},
		{"missing file", func(m *Manifest) { m.Files = m.Files[:1] }, "1 files for 2 partitions"},
		{"file order", func(m *Manifest) { m.Files[0], m.Files[1] = m.Files[1], m.Files[0] }, "files[0] is for partition 1"},
		{"escaping path", func(m *Manifest) { m.Files[1].Path = "../p-00001.dpb" }, `files[1].path "../p-00001.dpb" is not a plain file name`},
		{"absolute path", func(m *Manifest) { m.Files[1].Path = "/etc/passwd" }, `files[1].path "/etc/passwd" is not a plain file name`},
		{"too small", func(m *Manifest) { m.Files[1].Bytes = 3 }, "files[1] has 3 records in 3 bytes"},
		{"checksum", func(m *Manifest) { m.Files[1].SHA256 = "abc" }, `files[1].sha256 "abc" is not a hex SHA-256`},
		{"key range", func(m *Manifest) { m.Files[1].FirstKey = nil }, "files[1] key range disagrees with its 3 records"},
		{"key order", func(m *Manifest) { m.Files[1].FirstKey, m.Files[1].LastKey = m.Files[1].LastKey, m.Files[1].FirstKey }, "files[1] firstKey sorts after lastKey"},
		{"records", func(m *Manifest) { m.Records = 4 }, "files hold 3 records, manifest says 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := testManifest(t)
			tc.change(m)
			err := m.Validate()
			if !errors.Is(err, ErrInvalidManifest) || !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			if err := WriteManifest(t.TempDir(), m); !errors.Is(err, ErrInvalidManifest) {
				t.Fatalf("WriteManifest wrote an invalid manifest: %v", err)
			}
		})
	}
}

func TestParseManifestRefusesMalformedJSON(t *testing.T) {
	good, err := testManifest(t).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string]string{
		"not json":      "{",
		"unknown field": strings.Replace(string(good), `"format"`, `"extra": 1, "format"`, 1),
		"trailing":      string(good) + "{}",
		"wrong type":    strings.Replace(string(good), `"partitions": 2`, `"partitions": "2"`, 1),
	} {
		if _, err := ParseManifest([]byte(b)); !errors.Is(err, ErrInvalidManifest) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if _, err := ParseManifest(good); err != nil {
		t.Fatal(err)
	}
}
