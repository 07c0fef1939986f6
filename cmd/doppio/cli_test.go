package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// cli runs the built binary against one dev node.
type cli struct {
	t      *testing.T
	bin    string
	server string
	env    []string // more environment, e.g. DOPPIO_CERTS_DIR
	// devOut is what `doppio dev` printed on stdout so far.
	devOut *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// run executes the binary with args (and stdin, if any) and returns its
// stdout, stderr and exit code.
func (c *cli) run(stdin string, args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(append(os.Environ(), "DOPPIO_SERVER="+c.server), c.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("doppio %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// ok runs a command that must succeed and returns its stdout with ETags and
// SCNs replaced by placeholders.
func (c *cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("doppio %s: exit %d\nstderr: %s", strings.Join(args, " "), code, errs)
	}
	return normalize(out)
}

var (
	etagRE = regexp.MustCompile(`"etag": "\\"[0-9a-f]+\\""`)
	scnRE  = regexp.MustCompile(`"scn": "\d+:\d+"`)
)

func normalize(s string) string {
	s = etagRE.ReplaceAllString(s, `"etag": ETAG`)
	return scnRE.ReplaceAllString(s, `"scn": SCN`)
}

func expect(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		t.Fatalf("%s:\ngot:\n%s\nwant:\n%s", what, got, want)
	}
}

// startDev builds the binary and runs `doppio dev` on a free port, reading
// the chosen address from its "http=" log line.
func startDev(t *testing.T) *cli {
	return startDevWith(t, buildBinary(t), filepath.Join(t.TempDir(), "data"))
}

// buildBinary builds doppio into a temporary directory.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "doppio")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startDevWith runs `doppio dev` of bin with its data in data and more
// flags.
func startDevWith(t *testing.T, bin, data string, flags ...string) *cli {
	dev := exec.Command(bin, append([]string{"dev", "--data", data, "--http", "127.0.0.1:0"}, flags...)...)
	out := &lockedBuffer{}
	dev.Stdout = out
	stderr, err := dev.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = dev.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = dev.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = dev.Process.Kill()
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		re := regexp.MustCompile(`doppio node ready.* http=(127\.0\.0\.1:\d+)`)
		sc := bufio.NewScanner(stderr)
		sent := false
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !sent {
				addr <- m[1]
				sent = true
			}
		}
	}()
	select {
	case a := <-addr:
		return &cli{t: t, bin: bin, server: "http://" + a, devOut: out}
	case <-time.After(60 * time.Second):
		t.Fatal("doppio dev did not log its address within 60s")
		return nil
	}
}

// aliceLunchSubjects is the page alice's two lunch messages make with
// only their subjects, which several listings print.
const aliceLunchSubjects = `{
  "documents": [
    {
      "key": [
        "alice",
        1
      ],
      "document": {
        "subject": "Lunch on Friday?"
      }
    },
    {
      "key": [
        "alice",
        2
      ],
      "document": {
        "subject": "Re: lunch"
      }
    }
  ]
}
`

func TestCLIMailboxEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := startDev(t)
	examples := filepath.Join("..", "..", "examples", "mailbox")

	expect(t, "schema apply", c.ok("", "schema", "apply", examples), `database MailboxDB: created
table MailboxDB/Mailbox: created, version 1
table MailboxDB/Message: created, version 1
skipped deliver-txn.json: a transaction, not a table
`)
	expect(t, "schema apply again", c.ok("", "schema", "apply", examples), `database MailboxDB: unchanged
table MailboxDB/Mailbox: unchanged, version 1
table MailboxDB/Message: unchanged, version 1
skipped deliver-txn.json: a transaction, not a table
`)

	expect(t, "schema status", c.ok("", "schema", "status", "MailboxDB/Message"), `subject    text       [##############################] 100%  0/0  ready
body       text       [##############################] 100%  0/0  ready
senderId   attribute  [##############################] 100%  0/0  ready
isInbox    attribute  [##############################] 100%  0/0  ready
createdOn  attribute  [##############################] 100%  0/0  ready
`)
	// Into a pipe, --wait draws each state once and writes no escape codes.
	expect(t, "schema status --wait into a pipe", c.ok("", "schema", "status", "MailboxDB/Message", "--wait"), `subject    text       [##############################] 100%  0/0  ready
body       text       [##############################] 100%  0/0  ready
senderId   attribute  [##############################] 100%  0/0  ready
isInbox    attribute  [##############################] 100%  0/0  ready
createdOn  attribute  [##############################] 100%  0/0  ready
`)

	// --server overrides $DOPPIO_SERVER.
	expect(t, "put", c.ok("", "--server", c.server, "put", "MailboxDB/Mailbox/alice", "-d", "{}"), `{
  "key": [
    "alice"
  ],
  "etag": ETAG,
  "scn": SCN,
  "version": 1,
  "created": true
}
`)
	expect(t, "txn", c.ok("", "txn", "MailboxDB", "-f", filepath.Join(examples, "deliver-txn.json")), `{
  "scn": SCN,
  "results": [
    {
      "key": [
        "alice",
        1
      ],
      "etag": ETAG,
      "created": true
    },
    {
      "key": [
        "alice"
      ],
      "etag": ETAG
    }
  ]
}
`)
	expect(t, "get mailbox", c.ok("", "get", "MailboxDB/Mailbox/alice"), `{
  "unreadCount": 1,
  "totalCount": 1,
  "pendingInvites": 0
}
`)
	expect(t, "patch", c.ok("", "patch", "MailboxDB/Mailbox/alice", "-d", `{"$inc":{"unreadCount":-1}}`), `{
  "key": [
    "alice"
  ],
  "etag": ETAG,
  "scn": SCN,
  "version": 1,
  "created": false
}
`)
	expect(t, "insert from stdin", c.ok(`{"subject":"Re: lunch","senderId":"carol","createdOn":1735736400000}`,
		"insert", "MailboxDB/Message/alice"), `{
  "key": [
    "alice",
    2
  ],
  "etag": ETAG,
  "scn": SCN,
  "version": 1,
  "created": true
}
`)
	expect(t, "get message with fields", c.ok("", "get", "MailboxDB/Message/alice/2", "--fields", "subject,folder,unread"), `{
  "subject": "Re: lunch",
  "folder": "inbox",
  "unread": true
}
`)
	page := c.ok("", "get", "MailboxDB/Message/alice", "--limit", "1", "--fields", "subject")
	if !strings.HasPrefix(page, `{
  "documents": [
    {
      "key": [
        "alice",
        1
      ],
      "document": {
        "subject": "Lunch on Friday?"
      }
    }
  ],
  "next": "`) {
		t.Fatalf("first page:\n%s", page)
	}
	expect(t, "get --all", c.ok("", "get", "MailboxDB/Message/alice", "--limit", "1", "--all", "--fields", "subject"), aliceLunchSubjects)

	expect(t, "get --query", c.ok("", "get", "MailboxDB/Message/alice", "--query", "subject:lunch", "--fields", "subject"), aliceLunchSubjects)
	expect(t, "get --count", c.ok("", "get", "MailboxDB/Message/alice", "--query", `"lunch on friday"`, "--count"), `{
  "count": 1
}
`)

	// Key parts are plain text: spaces, commas, parentheses and Unicode are
	// percent-encoded by the client.
	odd := "Zoë (work), #2"
	c.ok(`{"pendingInvites":3}`, "put", "MailboxDB/Mailbox/"+odd)
	expect(t, "get odd key", c.ok("", "get", "MailboxDB/Mailbox/"+odd, "--fields", "pendingInvites"), "{\n  \"pendingInvites\": 3\n}\n")

	// Failures print the problem's detail and exit non-zero.
	_, errs, code := c.run("", "put", "MailboxDB/Mailbox/alice", "-d", "{}", "--if-match", `"0000"`)
	if code != exitConflict || !strings.HasPrefix(errs, `doppio: If-Match: the document's ETag is "`) {
		t.Fatalf("conditional put: exit %d, stderr %q", code, errs)
	}
	_, errs, code = c.run("", "get", "MailboxDB/Mailbox/nobody")
	if code != exitNotFound || errs != "doppio: document Mailbox [\"nobody\"] does not exist\n" {
		t.Fatalf("get missing: exit %d, stderr %q", code, errs)
	}
	_, errs, code = c.run("", "put", "MailboxDB/Mailbox/alice", "-d", `{"unreadCount":"x"}`)
	if code != 1 || !strings.Contains(errs, "unreadCount") {
		t.Fatalf("put mismatching document: exit %d, stderr %q", code, errs)
	}

	// An insert run again under its --idempotency-key prints the first
	// outcome and inserts nothing; the key with another document fails.
	zed := `{"subject":"once","senderId":"carol","createdOn":1735736400000}`
	first, _, code := c.run(zed, "insert", "MailboxDB/Message/zed", "--idempotency-key", "cli-1")
	again, _, code2 := c.run(zed, "insert", "MailboxDB/Message/zed", "--idempotency-key", "cli-1")
	if code != 0 || code2 != 0 || again != first || !strings.Contains(first, "\"zed\",\n    1\n") {
		t.Fatalf("insert with a key twice: exit %d then %d,\n%s\nthen\n%s", code, code2, first, again)
	}
	_, errs, code = c.run(`{"subject":"other","senderId":"carol","createdOn":1}`, "insert", "MailboxDB/Message/zed", "--idempotency-key", "cli-1")
	if code == 0 || !strings.Contains(errs, `Idempotency-Key "cli-1" was used by another request`) {
		t.Fatalf("insert reusing a key: exit %d, stderr %q", code, errs)
	}
	if got := c.ok("", "get", "MailboxDB/Message/zed", "--fields", "subject"); strings.Count(got, `"zed"`) != 1 {
		t.Fatalf("mailbox zed after a repeated insert:\n%s", got)
	}

	expect(t, "delete document", c.ok("", "delete", "MailboxDB/Message/alice/2"), "{\n  \"deleted\": 1\n}\n")
	expect(t, "delete collection", c.ok("", "delete", "MailboxDB/Message/alice"), "{\n  \"deleted\": 1\n}\n")
	expect(t, "empty collection", c.ok("", "get", "MailboxDB/Message/alice"), "{\n  \"documents\": []\n}\n")

	schema := c.ok("", "schema", "get", "MailboxDB/Message", "--version", "1")
	if !strings.Contains(schema, `"index": "text"`) || !strings.HasPrefix(schema, "{\n  \"version\": 1,") {
		t.Fatalf("schema get --version 1:\n%s", schema)
	}
	dbView := c.ok("", "schema", "get", "MailboxDB")
	if !strings.HasPrefix(dbView, "{\n  \"name\": \"MailboxDB\",\n  \"partitions\": 8,\n  \"replicas\": 1,") {
		t.Fatalf("schema get MailboxDB:\n%s", dbView)
	}
}

func TestCLISchemaPutDatabaseAndTable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	c := startDev(t)
	out := c.ok("", "schema", "put", "Shop", "--partitions", "4", "--replicas", "1")
	expect(t, "schema put DB", out, `{
  "name": "Shop",
  "partitions": 4,
  "replicas": 1,
  "partitioner": "hash",
  "tables": []
}
`)
	file := filepath.Join(t.TempDir(), "table.json")
	def := `{"key":[{"name":"sku","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"price","type":"long"}]}}`
	if err := os.WriteFile(file, []byte(def), 0o644); err != nil {
		t.Fatal(err)
	}
	out = c.ok("", "schema", "put", "Shop/Item", "-f", file)
	if !strings.Contains(out, `"name": "Item"`) || !strings.Contains(out, `"version": 1,`) {
		t.Fatalf("schema put DB/Table:\n%s", out)
	}
	// Incompatible: a new field without a default.
	bad := `{"key":[{"name":"sku","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"price","type":"long"},{"name":"qty","type":"long"}]}}`
	_, errs, code := c.run(bad, "schema", "put", "Shop/Item")
	if code != exitConflict || !strings.Contains(errs, "qty") {
		t.Fatalf("incompatible schema: exit %d, stderr %q", code, errs)
	}
	_, errs, code = c.run("", "schema", "get", "Nope")
	if code != exitNotFound || errs != "doppio: database \"Nope\" does not exist\n" {
		t.Fatalf("schema get missing: exit %d, stderr %q", code, errs)
	}

	// A drop is refused while the table holds a document, unless forced.
	c.ok(`{"price":3}`, "put", "Shop/Item/k1")
	_, errs, code = c.run("", "schema", "drop", "Shop/Item")
	if code != exitConflict || !strings.Contains(errs, "force=true") {
		t.Fatalf("unforced drop of a table holding a document: exit %d, stderr %q", code, errs)
	}
	expect(t, "schema drop --force", c.ok("", "schema", "drop", "Shop/Item", "--force"), "table Shop/Item dropped\n")
	if _, _, code = c.run("", "get", "Shop/Item/k1"); code != exitNotFound {
		t.Fatalf("get of a dropped document: exit %d", code)
	}
	expect(t, "schema drop DB", c.ok("", "schema", "drop", "Shop"), "database Shop dropped\n")
	if _, errs, code = c.run("", "schema", "get", "Shop"); code != exitNotFound || !strings.Contains(errs, "does not exist") {
		t.Fatalf("schema get of a dropped database: exit %d, stderr %q", code, errs)
	}
}

func TestCLICheckReportsEachPartitionWithProgress(t *testing.T) {
	c := startDev(t)
	c.ok("", "schema", "put", "Shop", "--partitions", "2", "--replicas", "1")
	def := `{"key":[{"name":"sku","type":"string"}],"schema":{"type":"record","name":"Item","fields":[{"name":"price","type":"long"}]}}`
	c.ok(def, "schema", "put", "Shop/Item")
	for _, sku := range []string{"a", "b", "c", "d"} {
		c.ok(`{"price":1}`, "put", "Shop/Item/"+sku)
	}
	out := c.ok("", "check", "Shop")
	want := regexp.MustCompile(`^\[1/2\] partition 0: consistent at scn \d+:\d+ \(leader dev, \d+ keys, \d+ bytes\)
\[2/2\] partition 1: consistent at scn \d+:\d+ \(leader dev, \d+ keys, \d+ bytes\)
Shop: 2 partitions checked: 2 consistent
$`)
	if !want.MatchString(out) {
		t.Fatalf("doppio check Shop:\n%s", out)
	}
	out = c.ok("", "check", "Shop", "--partition", "1", "--no-repair")
	if !strings.HasPrefix(out, "[1/1] partition 1: consistent at scn ") || !strings.HasSuffix(out, "Shop: 1 partitions checked: 1 consistent\n") {
		t.Fatalf("doppio check Shop --partition 1:\n%s", out)
	}
	_, errs, code := c.run("", "check", "Nope")
	if code != exitNotFound || errs != "doppio: database \"Nope\" does not exist\n" {
		t.Fatalf("check of a missing database: exit %d, stderr %q", code, errs)
	}
	out, errs, code = c.run("", "check", "Shop", "--partition", "7")
	if code != exitNotFound || !strings.Contains(out, "[1/1] partition 7: failed: database \"Shop\" has partitions 0 to 1, not 7\n") ||
		errs != "doppio: 1 of 1 partitions of Shop are inconsistent or could not be checked\n" {
		t.Fatalf("check of a missing partition: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
