package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/keys"
)

// TestBulkBuildEncodesAsTheServerStores builds the mailbox example with
// the binary against `doppio dev` for the schema: the build uses the
// database's partition count and the latest schema version, a document
// in a partition file is byte for byte what the server stores for the
// same PUT, and an offline build from the table definition file at the
// older version equals the server-schema build at that version.
func TestBulkBuildEncodesAsTheServerStores(t *testing.T) {
	n := startDev(t, t.TempDir())
	if out, code := runCLI(t, n.addr, "schema", "apply", "../examples/mailbox"); code != 0 {
		t.Fatalf("schema apply: %s", out)
	}
	// Version 2 adds a field with a default.
	def, err := os.ReadFile("../examples/mailbox/Message.json")
	if err != nil {
		t.Fatal(err)
	}
	v2 := strings.Replace(string(def), `"fields": [`, `"fields": [{"name": "labels", "type": {"type": "array", "items": "string"}, "default": []},`, 1)
	n.must(200, "PUT", "/_schemas/MailboxDB/Message", v2)

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"mailboxId":"x","messageId":"one","subject":"s","senderId":"a","createdOn":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	input := "../examples/mailbox/messages.jsonl"
	latest := filepath.Join(dir, "latest")
	out, code := runCLI(t, n.addr, "bulk", "build", "--db", "MailboxDB", "--table", "Message", "--input", input, "--input", bad, "--out", latest)
	if code != 0 || !strings.Contains(out, "built "+latest+": MailboxDB.Message schema version 2, 300 records in 8 partitions, 1 rejected") ||
		!strings.Contains(out, "KiB read, 301 records, 1 rejected, 8 partitions written") {
		t.Fatalf("bulk build (exit %d):\n%s", code, out)
	}
	rejects, _ := os.ReadFile(filepath.Join(latest, bulk.RejectsName))
	if want := `{"input":"` + bad + `","record":1,"reason":"key part \"messageId\" must be a number (long), got string"}` + "\n"; string(rejects) != want {
		t.Fatalf("rejects %s, want %s", rejects, want)
	}
	m, err := bulk.ReadManifest(latest)
	if err != nil {
		t.Fatal(err)
	}
	if m.Partitions != 8 || m.SchemaVersion != 2 || m.Records != 300 || m.Rejected != 1 {
		t.Fatalf("manifest %+v", m)
	}

	// The first few messages, PUT through the API, are stored as built.
	built := readBuildRecords(t, latest, m)
	f, err := os.Open(input)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for i := 0; i < 20 && sc.Scan(); i++ {
		var msg map[string]any
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatal(err)
		}
		box, id := msg["mailboxId"].(string), int64(msg["messageId"].(float64))
		delete(msg, "mailboxId")
		delete(msg, "messageId")
		path := fmt.Sprintf("/MailboxDB/Message/%s/%d", url.PathEscape(box), id)
		n.must(201, "PUT", path, msg)
		stored := n.must(200, "GET", path, nil, "Accept", "avro/binary")
		key, _ := keys.EncodeTuple(keys.Tuple{box, id})
		if doc, ok := built[string(key)]; !ok || !bytes.Equal(doc, stored) {
			t.Fatalf("%s: built %x, stored %x", path, doc, stored)
		}
	}

	// Offline at version 1 equals the server's version 1.
	server1, offline1 := filepath.Join(dir, "server1"), filepath.Join(dir, "offline1")
	if out, code := runCLI(t, n.addr, "bulk", "build", "--db", "MailboxDB", "--table", "Message", input, "--out", server1, "--schema-version", "1", "--workers", "1"); code != 0 {
		t.Fatalf("server build at version 1: %s", out)
	}
	if out, code := runCLI(t, "http://127.0.0.1:1", "bulk", "build", "--db", "MailboxDB", "--table", "Message", input, "--out", offline1,
		"--schema-file", "../examples/mailbox/Message.json", "--schema-version", "1", "--partitions", "8", "--spill-bytes", "4096"); code != 0 {
		t.Fatalf("offline build: %s", out)
	}
	for p := range 8 {
		a, _ := os.ReadFile(filepath.Join(server1, bulk.FileName(p)))
		b, _ := os.ReadFile(filepath.Join(offline1, bulk.FileName(p)))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("partition %d: the server-schema and offline builds differ", p)
		}
	}

	// Refusals: a non-empty --out, an unknown table, a malformed input.
	for _, tc := range []struct {
		args []string
		code int // 3: the table does not exist; 1: any other failure
		want string
	}{
		{[]string{"--table", "Message", input, "--out", latest}, 1, "output directory " + latest + " is not empty: pass --overwrite to replace its contents"},
		{[]string{"--table", "Nope", input, "--out", filepath.Join(dir, "nope")}, 3, "table MailboxDB.Nope: "},
		{[]string{"--table", "Message", "--format", "csv", input, "--out", filepath.Join(dir, "csv")}, 1, `messages.jsonl: header: parse error on line 1, column 2: bare " in non-quoted-field`},
	} {
		out, code := runCLI(t, n.addr, append([]string{"bulk", "build", "--db", "MailboxDB"}, tc.args...)...)
		if code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("bulk build %v: exit %d, want %d and %q:\n%s", tc.args, code, tc.code, tc.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "csv", bulk.ManifestName)); !os.IsNotExist(err) {
		t.Errorf("a failed build left a manifest: %v", err)
	}
}

// readBuildRecords reads every record of a verified build by key.
func readBuildRecords(t *testing.T, dir string, m *bulk.Manifest) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, f := range m.Files {
		err := bulk.ReadFile(dir, f, func(rec bulk.Record) error {
			out[string(rec.Key)] = rec.Doc
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
