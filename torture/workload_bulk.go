package torture

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/bulk/builder"
)

// Bulk is the bulk-load workload (docs/design/bulk.md, "Loading"): a
// build made with the Go builder is loaded in merge mode into a live
// table, throttled so that it spans the run, while writers put documents
// both to keys the build loads and to keys of their own. Afterwards the
// load must be done, and the table's change stream (read from before the
// first write) and its final contents are checked:
//
//   - every input record is one load event, exactly once: a resumed
//     partition neither skips nor repeats a record;
//   - every acknowledged write is one event, at the SCN its answer named;
//   - merge: no acknowledged write is overwritten by a load event (or a
//     write) earlier in its partition's timeline, so an input record is
//     missing only where a write came after its chunk;
//   - the final contents are the last event of every key, and nothing
//     else: no document that was never loaded or attempted.
type Bulk struct {
	// Records, Writers: defaults 1500, 3.
	Records, Writers int
	// Idle is how long the stream must bring nothing new, once everything
	// expected was seen, for the check to end (default 2.5 s).
	Idle time.Duration

	hist    *History
	builds  string // the build's directory, removed by Check
	source  string // the build
	total   int64  // the build's file bytes
	start   string // the change stream's checkpoint before the first write
	load    string // the load's ID, once started
	harness []string
}

const bulkDB = "torture_bulk"

const bulkTable = `{"key":[{"name":"k","type":"string"}],
 "schema":{"type":"record","name":"Item","fields":[{"name":"src","type":"string"},{"name":"n","type":"long"},{"name":"pad","type":"string","default":""}]}}`

// bulkPad gives a loaded document some weight; the whole build stays
// small, since the suite's time is short.
var bulkPad = strings.Repeat("p", 300)

// Name implements Workload.
func (w *Bulk) Name() string { return "bulk" }

func (w *Bulk) defaults() {
	if w.Records == 0 {
		w.Records = 1500
	}
	if w.Writers == 0 {
		w.Writers = 3
	}
	if w.Idle == 0 {
		w.Idle = 2500 * time.Millisecond
	}
}

func bulkKey(i int) string { return fmt.Sprintf("k%05d", i) }

// buildTable builds db.table (partitions of the workloads' databases,
// schema version 1, def the table's definition) from the JSON Lines that
// lines writes, into out with the Go builder, and returns out.
func buildTable(ctx context.Context, out, db, table, def string, lines func(io.Writer)) (string, error) {
	var spec builder.Spec
	if err := json.Unmarshal([]byte(def), &spec); err != nil {
		return "", err
	}
	tg, err := builder.NewTarget(db, table, workloadPartitions, 1, spec)
	if err != nil {
		return "", err
	}
	in := out + ".jsonl"
	f, err := os.Create(in)
	if err != nil {
		return "", err
	}
	defer os.Remove(in)
	bw := bufio.NewWriter(f)
	lines(bw)
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	m, err := builder.Build(ctx, builder.Config{Target: tg, Inputs: []builder.Input{{Path: in, Format: builder.JSONLines}}, Out: out, Workers: 1})
	if err == nil && m.Rejected > 0 {
		err = fmt.Errorf("build of %s.%s rejected %d records (see %s)", db, table, m.Rejected, out)
	}
	return out, err
}

// Setup implements Workload: the table, the build and the stream's
// checkpoint before any write.
func (w *Bulk) Setup(ctx context.Context, t Target) error {
	w.defaults()
	if _, err := setupDatabase(ctx, t, 31, bulkDB, map[string]string{"Item": bulkTable}); err != nil {
		return err
	}
	var err error
	if w.builds, err = os.MkdirTemp("", "doppio-torture-bulk-"); err != nil {
		return err
	}
	w.source, err = buildTable(ctx, filepath.Join(w.builds, "build"), bulkDB, "Item", bulkTable, func(out io.Writer) {
		for i := range w.Records {
			fmt.Fprintf(out, `{"k":%q,"src":"load","n":%d,"pad":%q}`+"\n", bulkKey(i), i, bulkPad)
		}
	})
	if err != nil {
		return err
	}
	m, err := bulk.ReadManifest(w.source)
	if err != nil {
		return err
	}
	for _, f := range m.Files {
		w.total += f.Bytes
	}
	w.start, err = startCheckpoint(ctx, t, bulkDB)
	return err
}

// bulkWrite is a write's input: its key and the token it writes.
type bulkWrite struct {
	Key   string `json:"key"`
	Token string `json:"token"`
}

// Run implements Workload: client 0 starts the load once the writes are
// going, then writes like the others.
func (w *Bulk) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Writers, &w.hist, func(c *Client, seq int64) {
		if c.ID == 0 && seq == 1 {
			w.startLoad(ctx, c)
			return
		}
		key := fmt.Sprintf("w%d-%d", c.ID, seq)
		if c.rng.IntN(2) == 0 {
			key = bulkKey(c.rng.IntN(w.Records))
		}
		in := bulkWrite{Key: key, Token: fmt.Sprintf("w%d-%d", c.ID, seq)}
		op := w.hist.Invoke(c.ID, "write", key, true, in)
		resp, err := c.Do(ctx, "PUT", "/"+bulkDB+"/Item/"+url.PathEscape(key), map[string]any{"src": in.Token, "n": -seq})
		outcome := Classify(true, resp, err)
		var out struct {
			SCN string `json:"scn"`
		}
		if outcome == Acked {
			_ = resp.Decode(&out)
		}
		w.hist.Complete(op, outcome, out.SCN, describe(resp, err))
	})
}

// startLoad starts the load, throttled so that each node's share takes
// about half the run, and retries until a node answers it: the same
// build is the same load.
func (w *Bulk) startLoad(ctx context.Context, c *Client) {
	sleepCtx(ctx, 300*time.Millisecond)
	d := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	nodes := int64(len(c.endpoints))
	throttle := max(w.total/nodes*2/max(int64(d/time.Second), 1), 64<<10)
	op := w.hist.Invoke(c.ID, "load", "", true, map[string]any{"source": w.source, "throttle": throttle})
	resp, err := c.Retry(ctx, "POST", "/_bulk/loads", map[string]any{"source": w.source, "throttle": throttle}, http.StatusOK, http.StatusAccepted)
	var l wire.Load
	if err == nil {
		err = resp.Decode(&l)
	}
	if err != nil || l.ID == "" {
		w.harness = append(w.harness, fmt.Sprintf("bulk: the load was not started: %v", err))
		w.hist.Complete(op, Indeterminate, nil, err)
		return
	}
	w.load = l.ID
	w.hist.Complete(op, Acked, l.ID, nil)
}

// Check implements Workload: wait for the load to be done, read the
// change stream and the table, and judge.
func (w *Bulk) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	defer os.RemoveAll(w.builds)
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"bulk: Check before Run"}}
	}
	res := w.hist.result(w.Name())
	res.Failures = append(res.Failures, w.harness...)
	if w.load == "" {
		return res
	}
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(37, 38)))
	var l wire.Load
	for {
		resp, err := c.Retry(ctx, "GET", "/_bulk/loads/"+w.load, nil, http.StatusOK)
		if err == nil && resp.Decode(&l) == nil && l.State != wire.LoadVerifying && l.State != wire.LoadLoading {
			break
		}
		if ctx.Err() != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("bulk: the load is still %s (%d of %d records) at the check's deadline", l.State, l.Records, l.TotalRecords))
			return res
		}
		time.Sleep(200 * time.Millisecond)
	}
	if l.State != wire.LoadDone || l.Records != uint64(w.Records) || l.PartitionsDone != l.TotalPartitions {
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: the load ended %s%s with %d of %d records and %d of %d partitions done",
			l.State, errSuffix(l.Error), l.Records, w.Records, l.PartitionsDone, l.TotalPartitions))
		return res
	}
	ops := w.hist.Ops()
	want := map[string]bool{}
	for _, op := range ops {
		if in, ok := op.Input.(bulkWrite); ok && op.Outcome == Acked {
			want[in.Token] = true
		}
	}
	loaded := 0
	events, err := readChanges(ctx, t, bulkDB, w.start, w.Idle, func(e changeLine) {
		switch src := bulkSource(e); {
		case src == "load":
			loaded++
		case want[src]:
			delete(want, src)
		}
	}, func() bool { return len(want) == 0 && loaded >= w.Records })
	if err != nil {
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: the stream did not deliver every load event and acknowledged write: %v", err))
	}
	final, err := bulkContents(ctx, c)
	if err != nil {
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: final read: %v", err))
		return res
	}
	res = judgeBulk(res, w.Records, ops, events, final)
	if !res.OK() && dir != "" {
		p := dir + "/bulk-history.jsonl"
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
		p = dir + "/bulk-stream.jsonl"
		if writeLines(p, events) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " (" + e + ")"
}

// bulkDoc is a document's origin: "load" or a write's token.
type bulkDoc struct {
	Src string `json:"src"`
	N   any    `json:"n"`
}

// bulkSource is the origin an event's after-image names ("" for a
// delete or an unreadable one).
func bulkSource(l changeLine) string {
	var d bulkDoc
	if len(l.After) == 0 || json.Unmarshal(l.After, &d) != nil {
		return ""
	}
	return d.Src
}

// bulkContents reads every document of the table, page by page.
func bulkContents(ctx context.Context, c *Client) (map[string]bulkDoc, error) {
	out := map[string]bulkDoc{}
	cursor := ""
	for {
		path := "/" + bulkDB + "/Item?query=*&limit=1000"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, err := c.Retry(ctx, "GET", path, nil, http.StatusOK)
		if err != nil {
			return nil, err
		}
		var page struct {
			Documents []struct {
				Key      []any   `json:"key"`
				Document bulkDoc `json:"document"`
			} `json:"documents"`
			Next string `json:"next"`
		}
		if err := resp.Decode(&page); err != nil {
			return nil, err
		}
		for _, d := range page.Documents {
			var k string
			if len(d.Key) == 1 {
				k, _ = d.Key[0].(string)
			}
			if _, dup := out[k]; dup || k == "" {
				return nil, fmt.Errorf("document %v answered twice or with a bad key", d.Key)
			}
			out[k] = d.Document
		}
		if cursor = page.Next; cursor == "" {
			return out, nil
		}
	}
}

// scnLess orders two "generation:sequence" SCNs of one partition.
func scnLess(a, b string) bool {
	ag, as, _ := scnOf(a)
	bg, bs, _ := scnOf(b)
	return ag < bg || ag == bg && as < bs
}

// judgeBulk checks the stream and the final contents against the input
// (records k00000… loaded with n = i) and the writes.
func judgeBulk(res Result, records int, ops []Op, events []changeLine, final map[string]bulkDoc) Result {
	violation := func(format string, args ...any) {
		res.Violations++
		if len(res.Failures) < 50 {
			res.Failures = append(res.Failures, "bulk: "+fmt.Sprintf(format, args...))
		}
	}
	writes := map[string]Op{} // by token
	for _, op := range ops {
		if in, ok := op.Input.(bulkWrite); ok {
			writes[in.Token] = op
		}
	}
	type event struct{ src, scn string }
	last := map[string]event{} // by key: its last event, in its partition's order
	loads := map[string][]string{}
	seen := map[string]string{} // token → SCN
	for _, e := range events {
		if e.SCN == "" || len(e.Key) != 1 {
			continue
		}
		k, _ := e.Key[0].(string)
		src := bulkSource(e)
		last[k] = event{src, e.SCN}
		switch op, ok := writes[src]; {
		case e.Op == "delete":
			violation("%s deleted at %s: nothing deletes", k, e.SCN)
		case src == "load":
			var d bulkDoc
			_ = json.Unmarshal(e.After, &d)
			if n, _ := num(d.N); bulkKey(int(n)) != k {
				violation("%s loaded at %s with n=%v, the input has %s", k, e.SCN, d.N, k)
			}
			loads[k] = append(loads[k], e.SCN)
		case !ok || op.Input.(bulkWrite).Key != k:
			violation("%s written at %s by %q, which never wrote it", k, e.SCN, src)
		case op.Outcome == Failed:
			violation("%s written at %s by %s, which was refused (%s)", k, e.SCN, src, op.Error)
		default:
			if at, dup := seen[src]; dup {
				violation("write %s appears at %s and again at %s", src, at, e.SCN)
			}
			seen[src] = e.SCN
			if scn, _ := op.Output.(string); op.Outcome == Acked && scn != "" && scn != e.SCN {
				violation("write %s appears at %s, it was acknowledged at %s", src, e.SCN, scn)
			}
		}
	}
	var skipped, doubled []string
	for i := range records {
		switch k := bulkKey(i); len(loads[k]) {
		case 1:
		case 0:
			skipped = append(skipped, k)
		default:
			doubled = append(doubled, fmt.Sprintf("%s at %v", k, loads[k]))
		}
	}
	for k := range loads {
		if k >= bulkKey(records) || !strings.HasPrefix(k, "k") {
			violation("%s loaded, but the input has no such record", k)
		}
	}
	if len(skipped) > 0 {
		res.Lost += len(skipped)
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: %d input records never loaded: %v", len(skipped), firstN(skipped, 20)))
	}
	if len(doubled) > 0 {
		res.Violations += len(doubled)
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: %d input records loaded more than once: %v", len(doubled), firstN(doubled, 20)))
	}
	// The contents are the last event of every key.
	for k, e := range last {
		if d, ok := final[k]; !ok || d.Src != e.src {
			violation("%s holds %q, its last event (at %s) wrote %q", k, d.Src, e.scn, e.src)
		}
	}
	for k, d := range final {
		if _, ok := last[k]; !ok {
			violation("%s holds %q, which no event wrote", k, d.Src)
		}
	}
	// Merge: a document's origin is never earlier in its partition's
	// timeline than an acknowledged write to it, nor than its load.
	origin := func(k, src string) (string, bool) {
		if src == "load" {
			l := loads[k]
			if len(l) == 0 {
				return "", false
			}
			return l[len(l)-1], true
		}
		at, ok := seen[src]
		return at, ok
	}
	for i := range records {
		k := bulkKey(i)
		d, ok := final[k]
		if !ok || d.Src == "load" || len(loads[k]) != 1 {
			continue // a missing document is the last event's failure above
		}
		if at, ok := origin(k, d.Src); ok && scnLess(at, loads[k][0]) {
			violation("%s holds write %s at %s, which its load at the later %s should have replaced", k, d.Src, at, loads[k][0])
		}
	}
	var lost []string
	tokens := make([]string, 0, len(writes))
	for tok := range writes {
		tokens = append(tokens, tok)
	}
	sort.Strings(tokens)
	for _, tok := range tokens {
		op := writes[tok]
		if op.Outcome != Acked {
			continue
		}
		k := op.Input.(bulkWrite).Key
		at, ok := op.Output.(string)
		if !ok || at == "" {
			at = seen[tok]
		}
		if _, inStream := seen[tok]; !inStream {
			lost = append(lost, fmt.Sprintf("%s (to %s, at %v) is not in the stream", tok, k, op.Output))
			continue
		}
		d, present := final[k]
		if !present {
			lost = append(lost, fmt.Sprintf("%s (to %s, at %s): the document is gone", tok, k, at))
			continue
		}
		if d.Src == tok {
			continue
		}
		if o, ok := origin(k, d.Src); !ok || scnLess(o, at) {
			lost = append(lost, fmt.Sprintf("%s (to %s, at %s) was overwritten by %q from the earlier %s", tok, k, at, d.Src, o))
		}
	}
	if len(lost) > 0 {
		res.Lost += len(lost)
		res.Failures = append(res.Failures, fmt.Sprintf("bulk: %d acknowledged writes not intact: %v", len(lost), firstN(lost, 20)))
	}
	return res
}

// History is the run's recorded history (nil before Run).
func (w *Bulk) History() *History { return w.hist }
