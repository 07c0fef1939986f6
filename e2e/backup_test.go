package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/backup"
	"github.com/doppio-db/doppio/internal/backupdir"
	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
)

const (
	backupMessageSchema = `{"key":[{"name":"box","type":"string"},{"name":"msg","type":"long","autoIncrement":true}],
 "schema":{"type":"record","name":"Message","fields":[{"name":"subject","type":"string","index":"text"},{"name":"folder","type":"string","index":"attribute"},{"name":"size","type":"long","index":"attribute","default":0}]}}`
	backupProfileV1 = `{"key":[{"name":"user","type":"string"}],
 "schema":{"type":"record","name":"Profile","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","index":"attribute"}]}}`
	backupProfileV2 = `{"key":[{"name":"user","type":"string"}],
 "schema":{"type":"record","name":"Profile","fields":[{"name":"name","type":"string"},{"name":"age","type":"int","index":"attribute"},{"name":"city","type":"string","default":"nowhere"}]}}`
	backupNoteSchema = `{"key":[{"name":"id","type":"string"}],
 "schema":{"type":"record","name":"Note","fields":[{"name":"text","type":"string"}]}}`
)

// docState is what a read of one document answered.
type docState struct {
	status int
	etag   string
	body   string
}

// backupModel is every document path the test wrote, and the queries it
// checks, read back as they are on a cluster.
type backupModel struct {
	paths   map[string]bool // "/Table/k1/k2"
	boxes   []string
	queries []string
}

func (m *backupModel) read(t *testing.T, n *devNode, db string) map[string]docState {
	t.Helper()
	out := map[string]docState{}
	for p := range m.paths {
		status, h, b := n.do("GET", "/"+db+p, nil)
		if status != 200 {
			b = nil // a problem names its instance, whose path has the database
		}
		out[p] = docState{status, h.Get("ETag"), string(b)}
	}
	for _, box := range m.boxes {
		out["collection "+box] = docState{200, "", string(n.must(200, "GET", "/"+db+"/Message/"+box, nil))}
	}
	for _, q := range m.queries {
		out["query "+q] = docState{200, "", string(n.must(200, "GET", "/"+db+q, nil))}
	}
	return out
}

func sameState(t *testing.T, what string, got, want map[string]docState) {
	t.Helper()
	var diffs []string
	for k, w := range want {
		if g := got[k]; g != w {
			diffs = append(diffs, fmt.Sprintf("%s: got %d %s %s, want %d %s %s", k, g.status, g.etag, g.body, w.status, w.etag, w.body))
		}
	}
	for k, g := range got {
		// Documents written after the backup are absent.
		if _, ok := want[k]; !ok && strings.HasPrefix(k, "/") && g.status != 404 {
			diffs = append(diffs, fmt.Sprintf("%s (written after the backup): got %d %s, want 404", k, g.status, g.body))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("%s differs from the source in %d of %d reads:\n%s", what, len(diffs), len(want), strings.Join(diffs[:min(len(diffs), 10)], "\n"))
	}
}

func doppio(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(binary, mode.args(args)...).CombinedOutput()
	return string(out), err
}

var backupLine = regexp.MustCompile(`backup (\S+) of shop: (full|incremental to (\S+)),`)

func takeBackup(t *testing.T, n *devNode, dir string) (string, string) {
	t.Helper()
	out, err := doppio(t, "backup", "shop", "--to", dir, "--server", n.addr)
	if err != nil {
		t.Fatalf("doppio backup: %v\n%s", err, out)
	}
	m := backupLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("doppio backup printed no backup line:\n%s", out)
	}
	t.Logf("doppio backup:\n%s", out)
	return m[1], m[3]
}

func seqOf(t *testing.T, scn string) uint64 {
	t.Helper()
	s, err := partition.ParseSCN(scn)
	if err != nil {
		t.Fatal(err)
	}
	return s.Sequence
}

// TestBackupAndRestoreIntoAnotherCluster backs up a database of a
// three-node cluster (RF 3) while it takes writes, then incrementally
// after updates, deletes and inserts, and restores both into a one-node
// cluster: every document (ETag included), collection and index query
// equals the source at the backups' SCNs, writes after the last backup are
// absent, and the restored database continues the source's auto-increment
// counters, SCNs and change log. A non-empty database, a corrupt backup
// and bad arguments are refused before anything changes.
func TestBackupAndRestoreIntoAnotherCluster(t *testing.T) {
	nodes := startCluster(t)
	n1, n2 := nodes[0].devNode, nodes[1].devNode
	const partitions = 4
	n1.must(201, "PUT", "/_schemas/shop", map[string]any{"partitions": partitions, "replicas": 3})
	n1.must(201, "PUT", "/_schemas/shop/Message", backupMessageSchema)
	n1.must(201, "PUT", "/_schemas/shop/Profile", backupProfileV1)
	n1.must(201, "PUT", "/_schemas/shop/Note", backupNoteSchema)
	waitFor(t, 60*time.Second, "source cluster settled", func() (bool, string) { return settled(clusterInfo(t, nodes[0]), partitions, 3) })

	m := &backupModel{paths: map[string]bool{}}
	lastMsg := map[string]int64{}
	insert := func(box, subject, folder string) {
		var res struct {
			Key []any `json:"key"`
		}
		b := n1.must(201, "POST", "/shop/Message/"+box, map[string]any{"subject": subject, "folder": folder, "size": len(subject)})
		if err := json.Unmarshal(b, &res); err != nil || len(res.Key) != 2 {
			t.Fatalf("insert answer %s", b)
		}
		id := int64(res.Key[1].(float64))
		lastMsg[box] = id
		m.paths[fmt.Sprintf("/Message/%s/%d", box, id)] = true
	}
	for i := range 8 {
		box := fmt.Sprintf("box%d", i)
		m.boxes = append(m.boxes, box)
		for j := range 5 {
			insert(box, fmt.Sprintf("hello %d from %d", j, i), []string{"inbox", "sent"}[j%2])
		}
	}
	for i := range 12 {
		n1.must(201, "PUT", fmt.Sprintf("/shop/Profile/u%d", i), map[string]any{"name": fmt.Sprint("user ", i), "age": 20 + i})
		m.paths[fmt.Sprintf("/Profile/u%d", i)] = true
	}
	n1.must(200, "PUT", "/_schemas/shop/Profile", backupProfileV2)
	n1.must(200, "PUT", "/shop/Profile/u3", map[string]any{"name": "user 3", "age": 23, "city": "Lyon"})
	m.queries = []string{
		"/Message/box1?query=folder:inbox",
		"/Message/box2?query=hello&sort=-size",
		"/Message?query=" + url.QueryEscape("folder:sent AND size:[0 TO 100]") + "&sort=size&limit=100",
		"/Profile?query=" + url.QueryEscape("age:[25 TO 28]") + "&sort=age",
	}
	atFull := m.read(t, n1, "shop")

	// The full backup runs while a writer adds notes through another node.
	dir := t.TempDir()
	var (
		stop  atomic.Bool
		wg    sync.WaitGroup
		noted sync.Map // note id -> SCN of its acknowledged write
		notes atomic.Int64
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; !stop.Load(); i++ {
			id := fmt.Sprint("c", i)
			status, h, b, err := n2.try(context.Background(), "PUT", "/shop/Note/"+id, map[string]any{"text": id})
			if err != nil || status != 201 {
				t.Errorf("note %s: %d %s %v", id, status, b, err)
				return
			}
			noted.Store(id, h.Get("X-Doppio-SCN"))
			notes.Add(1)
		}
	}()
	waitFor(t, 30*time.Second, "notes written before the backup", func() (bool, string) { return notes.Load() >= 20, "" })
	fullID, prev := takeBackup(t, n1, dir)
	if prev != "" {
		t.Fatalf("first backup is incremental to %s", prev)
	}
	after := notes.Load() + 10
	waitFor(t, 30*time.Second, "notes written after the backup", func() (bool, string) { return notes.Load() >= after, "" })
	stop.Store(true)
	wg.Wait()
	full, err := backupdir.ReadManifest(dir, fullID)
	if err != nil {
		t.Fatal(err)
	}
	if got := metricSum(t, "doppio_backup_partitions_total", `kind="backup",outcome="ok"`, n1, n2, nodes[2].devNode); got != partitions {
		t.Fatalf("partition backups counted by the leaders: %v, want %d", got, partitions)
	}
	versions := map[string]int{}
	for _, tb := range full.Tables {
		versions[tb.Name] = len(tb.Versions)
	}
	if fmt.Sprint(versions) != "map[Message:1 Note:1 Profile:2]" {
		t.Fatalf("manifest tables and their versions: %v", versions)
	}

	// After the full backup: updates, deletes (one, and a collection), new
	// documents.
	n1.must(200, "PATCH", "/shop/Profile/u1", map[string]any{"$set": map[string]any{"city": "Oslo"}, "$inc": map[string]any{"age": 1}})
	n1.must(204, "DELETE", "/shop/Profile/u2", nil)
	n1.must(204, "DELETE", "/shop/Message/box3/2", nil)
	n1.must(204, "DELETE", "/shop/Message/box4", nil)
	for i := range 3 {
		insert("box5", fmt.Sprint("late news ", i), "inbox")
		insert("box9", fmt.Sprint("new box ", i), "sent")
	}
	m.boxes = append(m.boxes, "box9")
	n1.must(201, "PUT", "/shop/Profile/u20", map[string]any{"name": "new", "age": 26, "city": "Rome"})
	m.paths["/Profile/u20"] = true
	atInc := m.read(t, n1, "shop")
	incID, prev := takeBackup(t, n1, dir)
	if prev != fullID {
		t.Fatalf("second backup is incremental to %q, want %s", prev, fullID)
	}
	inc, err := backupdir.ReadManifest(dir, incID)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range inc.Parts {
		if !p.Incremental || p.Since != full.Parts[p.Partition].SCN || full.Parts[p.Partition].Entry == "" {
			t.Fatalf("partition %d of the incremental backup: %+v, want incremental since %s", p.Partition, p, full.Parts[p.Partition].SCN)
		}
	}
	if inc.Bytes() >= full.Bytes() {
		t.Errorf("incremental backup has %d bytes, the full one %d", inc.Bytes(), full.Bytes())
	}
	// Written after the last backup: never restored.
	insert("box5", "too late", "inbox")
	n1.must(201, "PUT", "/shop/Profile/u21", map[string]any{"name": "too late", "age": 30})

	// A one-node cluster restores the chain, then the full backup alone.
	target := startDev(t, t.TempDir())
	out, err := doppio(t, "restore", "--from", dir, "--server", target.addr, "--replicas", "1")
	if err != nil || !strings.Contains(out, fmt.Sprintf("restored backup %s of shop into shop: 4 partitions", incID)) {
		t.Fatalf("doppio restore: %v\n%s", err, out)
	}
	t.Logf("doppio restore:\n%s", out)
	sameState(t, "restored full+incremental backup", m.read(t, target, "shop"), atInc)

	out, err = doppio(t, "restore", "--from", dir, "--backup", fullID, "--as", "shopfull", "--server", target.addr, "--replicas", "1")
	if err != nil {
		t.Fatalf("doppio restore --backup %s: %v\n%s", fullID, err, out)
	}
	gotFull := m.read(t, target, "shopfull")
	delete(gotFull, "collection box9") // a group created after the full backup
	sameState(t, "restored full backup", gotFull, atFull)
	if got, want := metricSum(t, "doppio_backup_bytes_total", `kind="restore"`, target), float64(2*full.Bytes()+inc.Bytes()); got != want {
		t.Fatalf("restored bytes counted: %v, want %v", got, want)
	}
	// The notes written during the full backup: there exactly when their
	// SCN is at most their partition's in the backup.
	in, out2 := 0, 0
	noted.Range(func(k, v any) bool {
		id, scn := k.(string), v.(string)
		pk, _ := keys.EncodeTuple(keys.Tuple{id})
		p := keys.PartitionOf(pk, partitions)
		want := 404
		if seqOf(t, scn) <= seqOf(t, full.Parts[p].SCN) {
			want, in = 200, in+1
		} else {
			out2++
		}
		if got, _, b := target.do("GET", "/shopfull/Note/"+id, nil); got != want {
			t.Errorf("note %s (partition %d, SCN %s; backup at %s): %d %s, want %d", id, p, scn, full.Parts[p].SCN, got, b, want)
		}
		return true
	})
	t.Logf("notes written during the full backup: %d in it, %d after it", in, out2)

	// The restored database continues: the next auto-increment value, the
	// next SCN of the partition, and the change log from the full backup's
	// SCNs on equals the source's.
	var res struct {
		Key []any `json:"key"`
	}
	_, h, b := target.do("POST", "/shop/Message/box1", map[string]any{"subject": "after restore", "folder": "inbox"})
	if err := json.Unmarshal(b, &res); err != nil || len(res.Key) != 2 || int64(res.Key[1].(float64)) != lastMsg["box1"]+1 {
		t.Fatalf("insert after restore: %s, want message %d", b, lastMsg["box1"]+1)
	}
	pk, _ := keys.EncodeTuple(keys.Tuple{"box1"})
	p1 := keys.PartitionOf(pk, partitions)
	after1, _ := partition.ParseSCN(h.Get("X-Doppio-SCN"))
	last1, _ := partition.ParseSCN(inc.Parts[p1].SCN)
	if after1.Sequence != last1.Sequence+1 || after1.Generation < last1.Generation {
		t.Fatalf("first write after restore in partition %d has SCN %s, want sequence %d and a generation of at least %d", p1, after1, last1.Sequence+1, last1.Generation)
	}
	logFrom := func(n *devNode, db string) []string {
		cp := changes.Checkpoint{DB: db}
		for _, part := range full.Parts {
			scn, _ := partition.ParseSCN(part.SCN)
			cp.Set(changes.Position{Partition: part.Partition, SCN: scn})
		}
		s := openChanges(t, n, db+"?from="+url.QueryEscape(cp.String()))
		defer s.cancel()
		var want int
		for _, p := range inc.Parts {
			want += int(seqOf(t, p.SCN) - seqOf(t, full.Parts[p.Partition].SCN))
		}
		// Every transaction ends with one txnEnd event.
		var lines []string
		timeout := time.After(30 * time.Second)
		for ends := 0; ends < want; {
			select {
			case e, ok := <-s.lines:
				if !ok || e.Error != nil {
					t.Fatalf("change stream of %s ended: %+v", db, e)
				}
				if e.SCN == "" || seqOf(t, e.SCN) > seqOf(t, inc.Parts[e.Partition].SCN) {
					continue
				}
				lines = append(lines, e.short())
				if e.TxnEnd {
					ends++
				}
			case <-timeout:
				t.Fatalf("change stream of %s: %d of %d transactions within 30s", db, len(lines), want)
			}
		}
		sort.Strings(lines)
		return lines
	}
	src, dst := logFrom(n1, "shop"), logFrom(target, "shop")
	if strings.Join(src, "\n") != strings.Join(dst, "\n") {
		t.Fatalf("restored change log differs:\nsource:\n%s\nrestored:\n%s", strings.Join(src, "\n"), strings.Join(dst, "\n"))
	}

	// A restore interrupted after partition 0 began and loaded a table:
	// another backup is refused naming the unfinished one; the same one,
	// run again, converges.
	target.must(201, "PUT", "/_schemas/shop2", map[string]any{"partitions": partitions, "replicas": 1})
	target.must(201, "PUT", "/_schemas/shop2/Message", backupMessageSchema)
	target.must(201, "PUT", "/_schemas/shop2/Profile", backupProfileV1)
	target.must(200, "PUT", "/_schemas/shop2/Profile", backupProfileV2)
	target.must(201, "PUT", "/_schemas/shop2/Note", backupNoteSchema)
	target.must(200, "POST", "/_cluster/restore/shop2/0?step=begin&session="+incID, nil)
	first := full.Parts[0].Files[0]
	table, err := os.ReadFile(filepath.Join(dir, fullID, first.Name))
	if err != nil {
		t.Fatal(err)
	}
	target.must(200, "POST", "/_cluster/restore/shop2/0?step=load&from=shop&session="+incID+"&sha256="+first.SHA256, string(table))
	// Partition 1 finished before the interruption.
	target.must(200, "POST", "/_cluster/restore/shop2/1?step=begin&session="+incID, nil)
	for _, b := range []*backupdir.Manifest{full, inc} {
		for _, f := range b.Parts[1].Files {
			table, err := os.ReadFile(filepath.Join(dir, b.ID, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			target.must(200, "POST", "/_cluster/restore/shop2/1?step=load&from=shop&session="+incID+"&sha256="+f.SHA256, string(table))
		}
	}
	target.must(200, "POST", "/_cluster/restore/shop2/1?step=finish&session="+incID+"&scn="+inc.Parts[1].SCN, nil)
	if b := target.must(409, "PUT", "/shop2/Note/"+groupsByPartition(partitions)[0], map[string]any{"text": "x"}); !strings.Contains(string(b), "is being restored from backup "+incID) {
		t.Fatalf("write into a partition being restored: %s", b)
	}
	out, err = doppio(t, "restore", "--from", dir, "--backup", fullID, "--as", "shop2", "--server", target.addr)
	if err == nil || !strings.Contains(out, "partition 0 holds an unfinished restore of backup "+incID) {
		t.Fatalf("restore over another backup's unfinished restore: %v\n%s", err, out)
	}
	out, err = doppio(t, "restore", "--from", dir, "--as", "shop2", "--server", target.addr)
	if err != nil || !strings.Contains(out, "partition 1 was restored at SCN "+inc.Parts[1].SCN+" already") {
		t.Fatalf("rerun of the interrupted restore: %v\n%s", err, out)
	}
	sameState(t, "restore run again after an interruption", m.read(t, target, "shop2"), atInc)

	// Refusals. Into a database that holds data: nothing changes.
	before := m.read(t, target, "shop")
	out, err = doppio(t, "restore", "--from", dir, "--server", target.addr)
	if err == nil || !strings.Contains(out, "database shop is not empty: partition") {
		t.Fatalf("restore into a non-empty database: %v\n%s", err, out)
	}
	if b := target.must(409, "POST", "/_cluster/restore/shop/0?step=begin&session=other", nil); !strings.Contains(string(b), "partition 0 of shop is not empty (at SCN") {
		t.Fatalf("begin on a partition with data: %s", b)
	}
	sameState(t, "database after a refused restore", m.read(t, target, "shop"), before)
	// A corrupt file: refused before the database is created.
	bad := t.TempDir()
	if err := os.CopyFS(bad, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(bad, incID, inc.Parts[0].Files[0].Name)
	data, err := os.ReadFile(victim)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(victim, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = doppio(t, "restore", "--from", bad, "--as", "corrupt", "--server", target.addr)
	if err == nil || !strings.Contains(out, "the backup is corrupt") {
		t.Fatalf("restore of a corrupt backup: %v\n%s", err, out)
	}
	target.must(404, "GET", "/_schemas/corrupt", nil)
	// The node checks a table's checksum too.
	target.must(422, "POST", "/_cluster/restore/shop/0?step=load&session=x&from=shop&sha256="+strings.Repeat("0", 64), "not a table")
	// Bad arguments.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "shop"}, "--to DIR is required"},
		{[]string{"backup", "nope", "--to", t.TempDir()}, `database "nope" does not exist`},
		{[]string{"restore"}, "--from DIR is required"},
		{[]string{"backup", "shop", "--to", dir, "--parallel", "0"}, "--parallel 0: want at least 1"},
		{[]string{"restore", "--from", dir, "--replicas", "-1"}, "--replicas -1: want a positive count"},
		{[]string{"restore", "--from", dir, "--backup", "nope"}, `no backup "nope" in`},
		{[]string{"restore", "--from", t.TempDir()}, "no backup in"},
	} {
		out, err := doppio(t, append(c.args, "--server", target.addr)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("doppio %v: %v %q, want an error saying %q", c.args, err, out, c.want)
		}
	}
	target.must(201, "PUT", "/_schemas/two", map[string]any{"partitions": 2, "replicas": 1})
	if out, err := doppio(t, "restore", "--from", dir, "--as", "two", "--server", target.addr); err == nil || !strings.Contains(out, "database two has 2 partitions, the backup 4") {
		t.Errorf("restore into another partition count: %v %q", err, out)
	}
	// The streams moved from /_internal to /_cluster: the old paths are
	// unknown routes.
	target.must(404, "GET", "/_internal/backup/shop/0", nil)
	target.must(404, "POST", "/_internal/restore/shop/0?step=begin&session=x", nil)
	target.must(404, "GET", "/_cluster/backup/shop/9", nil)
	target.must(400, "GET", "/_cluster/backup/shop/0?since=yesterday", nil)
	target.must(400, "POST", "/_cluster/restore/shop/0?step=begin", nil)
	target.must(400, "POST", "/_cluster/restore/shop/0?step=undo&session=x", nil)
	target.must(409, "POST", "/_cluster/restore/shop/0?step=finish&session=x&scn=1:1", nil)
}

// metricSum adds up a metric's samples (with the given label text) over
// nodes' /metrics.
func metricSum(t *testing.T, name, labels string, nodes ...*devNode) float64 {
	t.Helper()
	var sum float64
	for _, n := range nodes {
		for _, line := range strings.Split(string(n.must(200, "GET", "/metrics", nil)), "\n") {
			labelled := strings.HasPrefix(line, name+"{") && strings.Contains(line, labels)
			if !labelled && !(labels == "" && strings.HasPrefix(line, name+" ")) {
				continue
			}
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err != nil {
				t.Fatalf("metric line %q: %v", line, err)
			}
			sum += v
		}
	}
	return sum
}

// TestClusterShowsARunningBackup holds a partition's backup stream open
// (the client stops reading, so the leader blocks writing it) and finds
// it, with its bytes so far, in /_cluster and /metrics; once read to its
// end the stream is complete and the transfer is gone.
func TestClusterShowsARunningBackup(t *testing.T) {
	n := startDev(t, t.TempDir())
	n.must(201, "PUT", "/_schemas/big", map[string]any{"partitions": 1, "replicas": 1})
	n.must(201, "PUT", "/_schemas/big/Blob", `{"key":[{"name":"id","type":"string"}],"schema":{"type":"record","name":"Blob","fields":[{"name":"data","type":"string"}]}}`)
	chunk := make([]byte, 128<<10)
	for i := range 96 {
		for j := range chunk {
			chunk[j] = "0123456789abcdef"[(i*7919+j*j*31+j>>3)%16]
		}
		n.must(201, "PUT", fmt.Sprintf("/big/Blob/b%d", i), map[string]any{"data": fmt.Sprintf("%x", chunk)})
	}
	resp, err := mode.http.Get(n.addr + "/_cluster/backup/big/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("backup stream: status %d", resp.StatusCode)
	}
	running := func() (bool, string) {
		var info struct {
			Transfers []struct {
				Node, Kind, DB string
				Partition      int
				Bytes          int64
			} `json:"transfers"`
		}
		b := n.must(200, "GET", "/_cluster", nil)
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		for _, tr := range info.Transfers {
			if tr.Kind == "backup" && tr.DB == "big" && tr.Partition == 0 && tr.Bytes > 0 {
				return true, string(b)
			}
		}
		return false, string(b)
	}
	waitFor(t, 30*time.Second, "the running backup in /_cluster", running)
	if got := metricSum(t, "doppio_backup_running", `kind="backup"`, n); got != 1 {
		t.Fatalf("doppio_backup_running{kind=backup} = %v, want 1", got)
	}
	fr := backup.NewFrameReader(resp.Body)
	tables, done := 0, false
	for !done {
		kind, _, err := fr.Next(nil)
		if err != nil {
			t.Fatalf("backup stream after %d tables: %v", tables, err)
		}
		switch kind {
		case backup.FrameEnd:
			tables++
		case backup.FrameDone:
			done = true
		}
	}
	if tables < 2 {
		t.Fatalf("a backup of ~24 MiB came in %d tables, want several of ~4 MiB", tables)
	}
	waitFor(t, 30*time.Second, "the finished backup gone from /_cluster", func() (bool, string) {
		ok, state := running()
		return !ok, state
	})
	if got := metricSum(t, "doppio_backup_partitions_total", `kind="backup",outcome="ok"`, n); got != 1 {
		t.Fatalf("doppio_backup_partitions_total{backup,ok} = %v, want 1", got)
	}
}

// TestRestoreIntoTwoNodesReplicatesEveryPartition backs up a one-node
// database and restores it, through a router, into a two-node cluster with
// two replicas per partition: both replicas of every partition answer
// every document (read locally, follower included) exactly as the source,
// at the same SCN.
func TestRestoreIntoTwoNodesReplicatesEveryPartition(t *testing.T) {
	src := startDev(t, t.TempDir())
	const partitions = 3
	src.must(201, "PUT", "/_schemas/shop", map[string]any{"partitions": partitions, "replicas": 1})
	src.must(201, "PUT", "/_schemas/shop/Message", backupMessageSchema)
	m := &backupModel{paths: map[string]bool{}}
	for i := range 30 {
		box := fmt.Sprint("box", i%6)
		b := src.must(201, "POST", "/shop/Message/"+box, map[string]any{"subject": fmt.Sprint("note ", i), "folder": "inbox"})
		var res struct {
			Key []any `json:"key"`
		}
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatal(err)
		}
		m.paths[fmt.Sprintf("/Message/%s/%v", box, res.Key[1])] = true
	}
	want := m.read(t, src, "shop")
	dir := t.TempDir()
	takeBackup(t, src, dir)

	data := t.TempDir()
	etcd := mode.startEtcd(t, filepath.Join(data, "etcd"))
	n1 := startClusterNode(t, "n1", data, etcd.Endpoints()[0])
	n2 := startClusterNode(t, "n2", data, etcd.Endpoints()[0])
	// Through a stateless router: it relays each step to a node, which
	// forwards it to the partition's leader.
	rt := runNode(t, []string{"router", "--etcd", etcd.Endpoints()[0], "--http", freePort(t), "--id", "r1"})
	if out, err := doppio(t, "restore", "--from", dir, "--replicas", "2", "--server", rt.addr); err != nil {
		t.Fatalf("doppio restore through a router: %v\n%s", err, out)
	}
	waitFor(t, 60*time.Second, "restored partitions settled on both nodes", func() (bool, string) { return settled(clusterInfo(t, n1), partitions, 2) })
	for _, n := range []*clusterNode{n1, n2} {
		got := map[string]docState{}
		for p := range m.paths {
			status, h, b := n.do("GET", "/shop"+p, nil, "X-Doppio-Staleness", "1h")
			got[p] = docState{status, h.Get("ETag"), string(b)}
		}
		for p := range want {
			if !strings.HasPrefix(p, "/") {
				delete(want, p)
			}
		}
		sameState(t, "replicas on "+n.id, got, want)
	}
}
