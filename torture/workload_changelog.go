package torture

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/changes"
)

// Changelog is the change-stream workload: clients commit transactions of
// one to three puts in a document group (two tables), each put carrying the
// transaction's unique token. After the run the stream GET /_changes/{db}
// is read from a checkpoint taken before the first write, and checked per
// partition: entries (the events of one SCN, closed by txnEnd) have
// sequences 1, 2, 3... with no gap or duplicate across leader changes
// (the sequence counts committed transactions and never restarts; the
// generation, the Raft term, never goes back), each entry is exactly one
// attempted transaction, and every acknowledged transaction appears exactly
// once, at the SCN its answer named.
type Changelog struct {
	// Groups, Clients: defaults 8, 6.
	Groups, Clients int
	// Idle is how long the stream must bring nothing new, once every
	// acknowledged transaction was seen, for the check to end (default 2.5 s:
	// more than two heartbeats).
	Idle time.Duration

	hist  *History
	start string // the stream's checkpoint before the first write
}

const changelogDB = "torture_changelog"

func changelogTable(name string) string {
	return `{"key":[{"name":"g","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"` + name + `","fields":[{"name":"tok","type":"long","default":0},{"name":"i","type":"int","default":0}]}}`
}

var changelogTables = []string{"A", "B"}

// Name implements Workload.
func (w *Changelog) Name() string { return "changelog" }

func (w *Changelog) defaults() {
	if w.Groups == 0 {
		w.Groups = 8
	}
	if w.Clients == 0 {
		w.Clients = 6
	}
	if w.Idle == 0 {
		w.Idle = 2500 * time.Millisecond
	}
}

// Setup implements Workload: the database, and the stream's current
// checkpoint (before any write: reading from it covers the whole log).
func (w *Changelog) Setup(ctx context.Context, t Target) error {
	w.defaults()
	if _, err := setupDatabase(ctx, t, 17, changelogDB, map[string]string{"A": changelogTable("A"), "B": changelogTable("B")}); err != nil {
		return err
	}
	cp, err := startCheckpoint(ctx, t, changelogDB)
	w.start = cp
	return err
}

// startCheckpoint is db's change stream's checkpoint now, asked of each
// node in turn until one answers.
func startCheckpoint(ctx context.Context, t Target, db string) (string, error) {
	var last error
	notFound := 0
	hc := newHTTPClient(t)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		cp, err := firstCheckpoint(ctx, hc, t.Endpoints()[attempt%len(t.Endpoints())], db)
		if err == nil {
			return cp, nil
		}
		last = err
		// A node may not know the new database yet (404) for a moment;
		// a steady 404 means the server has no change stream at all.
		if errors.Is(err, errNoStream) {
			if notFound++; notFound == 25 {
				return "", fmt.Errorf("GET /_changes/%s keeps answering 404: %w", db, err)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return "", fmt.Errorf("no checkpoint from GET /_changes/%s: %v", db, last)
}

// firstCheckpoint opens db's stream from now and returns the first
// checkpoint it carries.
func firstCheckpoint(ctx context.Context, hc *http.Client, endpoint, db string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var cp string
	err := streamChanges(ctx, hc, endpoint, db, "", func(line changeLine) bool {
		cp = line.Checkpoint
		return cp == ""
	})
	if cp != "" {
		return cp, nil
	}
	if err == nil {
		err = errors.New("stream ended without a checkpoint")
	}
	return "", err
}

// changeLine is one NDJSON line of the stream: an event (the client's
// wire type), a checkpoint-only heartbeat, or an error.
type changeLine struct {
	changes.Event
	Error json.RawMessage `json:"error"`
}

// errNoStream: the change stream answered 404.
var errNoStream = errors.New("no change stream")

// streamChanges reads GET /_changes/{db}?from=from on endpoint with hc,
// calling f for each line until f returns false, the stream ends or ctx
// does.
func streamChanges(ctx context.Context, hc *http.Client, endpoint, db, from string, f func(changeLine) bool) error {
	u := endpoint + "/_changes/" + db
	if from != "" {
		u += "?from=" + url.QueryEscape(from)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		err := fmt.Errorf("GET %s: %d %s", u, resp.StatusCode, strings.TrimSpace(b.String()))
		if resp.StatusCode == http.StatusNotFound {
			err = fmt.Errorf("%w: %w", errNoStream, err)
		}
		return err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line changeLine
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return fmt.Errorf("stream line %q: %w", sc.Text(), err)
		}
		if len(line.Error) > 0 {
			return fmt.Errorf("stream error: %s", line.Error)
		}
		if !f(line) {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("stream ended")
}

// txnInput is one transaction: its token and the (table, id) of its puts.
type txnInput struct {
	Token int64    `json:"token"`
	Group string   `json:"group"`
	Puts  []string `json:"puts"` // "A/3"
}

// Run implements Workload.
func (w *Changelog) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		w.txn(ctx, c, int64(c.ID+1)*1_000_000_000+seq)
	})
}

func (w *Changelog) txn(ctx context.Context, c *Client, tok int64) {
	g := fmt.Sprintf("g%d", c.rng.IntN(w.Groups))
	n := 1 + c.rng.IntN(3)
	in := txnInput{Token: tok, Group: g}
	var ops []map[string]any
	seen := map[string]bool{}
	for i := 0; len(ops) < n; i++ {
		tb, id := changelogTables[c.rng.IntN(2)], c.rng.IntN(10)
		k := fmt.Sprintf("%s/%d", tb, id)
		if seen[k] {
			continue
		}
		seen[k] = true
		in.Puts = append(in.Puts, k)
		ops = append(ops, map[string]any{"op": "put", "table": tb, "key": []any{g, id}, "document": map[string]any{"tok": tok, "i": len(ops)}})
	}
	sort.Strings(in.Puts)
	op := w.hist.Invoke(c.ID, "txn", g, true, in)
	resp, err := c.Do(ctx, "POST", "/"+changelogDB+"/_txn", map[string]any{"partitionKey": g, "ops": ops})
	outcome := Classify(true, resp, err)
	var out struct {
		SCN string `json:"scn"`
	}
	if outcome == Acked {
		_ = resp.Decode(&out)
	}
	w.hist.Complete(op, outcome, out.SCN, describe(resp, err))
}

// Check implements Workload: read the stream from the start until every
// acknowledged transaction was seen and it stayed idle for Idle, resuming
// from the last checkpoint (on another node) when it breaks.
func (w *Changelog) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"changelog: Check before Run"}}
	}
	res := w.hist.result(w.Name())
	ops := w.hist.Ops()
	want := map[int64]bool{}
	for _, op := range ops {
		if in, ok := op.Input.(txnInput); ok && op.Outcome == Acked {
			want[in.Token] = true
		}
	}
	events, err := readChanges(ctx, t, changelogDB, w.start, w.Idle, func(l changeLine) {
		if tok, ok := lineToken(l); ok && want[tok] {
			delete(want, tok)
		}
	}, func() bool { return len(want) == 0 })
	if err != nil {
		res.Failures = append(res.Failures, fmt.Sprintf("changelog: the stream did not deliver every acknowledged transaction before the check's deadline: %v", err))
	}
	res = judgeChangelog(res, ops, events)
	if !res.OK() && dir != "" {
		p := dir + "/changelog-history.jsonl"
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
		p = dir + "/changelog-stream.jsonl"
		if writeLines(p, events) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

// readChanges reads db's change stream from checkpoint from, resuming
// from its last checkpoint (on another node) when it breaks, and hands
// each event to seen, until done holds and the stream stayed idle for
// idle. It returns the events read, and an error when ctx ended first.
func readChanges(ctx context.Context, t Target, db, from string, idle time.Duration, seen func(changeLine), done func() bool) ([]changeLine, error) {
	var events []changeLine
	var lastErr error
	hc := newHTTPClient(t)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		timer := time.NewTimer(idle)
		sctx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-timer.C:
				cancel()
			case <-sctx.Done():
			}
		}()
		err := streamChanges(sctx, hc, t.Endpoints()[attempt%len(t.Endpoints())], db, from, func(l changeLine) bool {
			if l.Checkpoint != "" {
				from = l.Checkpoint
			}
			if l.SCN != "" {
				events = append(events, l)
				seen(l)
				timer.Reset(idle)
			}
			return true
		})
		timer.Stop()
		idled := sctx.Err() != nil && ctx.Err() == nil
		cancel()
		if idled && done() {
			return events, nil
		}
		if !idled {
			lastErr = err
			time.Sleep(200 * time.Millisecond)
		}
	}
	return events, fmt.Errorf("%w (last error: %v)", ctx.Err(), lastErr)
}

func writeLines(path string, events []changeLine) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// lineToken is the transaction token an event's post-image carries.
func lineToken(l changeLine) (int64, bool) {
	var doc struct {
		Tok any `json:"tok"`
	}
	if len(l.After) == 0 || json.Unmarshal(l.After, &doc) != nil {
		return 0, false
	}
	return num(doc.Tok)
}

// scnOf parses "g:s".
func scnOf(s string) (gen, seq uint64, ok bool) {
	g, q, found := strings.Cut(s, ":")
	gen, err1 := strconv.ParseUint(g, 10, 64)
	seq, err2 := strconv.ParseUint(q, 10, 64)
	return gen, seq, found && err1 == nil && err2 == nil
}

// changeEntry is one committed transaction as the stream showed it.
type changeEntry struct {
	scn      string
	gen, seq uint64
	events   []changeLine
}

// judgeChangelog checks the stream's events (in the order read) against
// the transactions attempted.
func judgeChangelog(res Result, ops []Op, events []changeLine) Result {
	violation := func(format string, args ...any) {
		res.Violations++
		if len(res.Failures) < 50 {
			res.Failures = append(res.Failures, "changelog: "+fmt.Sprintf(format, args...))
		}
	}
	// Entries per partition, in stream order.
	parts := map[int][]*changeEntry{}
	for _, e := range events {
		gen, seq, ok := scnOf(e.SCN)
		if !ok {
			violation("event with SCN %q", e.SCN)
			continue
		}
		es := parts[e.Partition]
		if n := len(es); n > 0 && es[n-1].scn == e.SCN && !es[n-1].events[len(es[n-1].events)-1].TxnEnd {
			es[n-1].events = append(es[n-1].events, e)
			continue
		}
		parts[e.Partition] = append(es, &changeEntry{scn: e.SCN, gen: gen, seq: seq, events: []changeLine{e}})
	}
	attempts := map[int64]Op{}
	for _, op := range ops {
		if in, ok := op.Input.(txnInput); ok {
			attempts[in.Token] = op
		}
	}
	seenAt := map[int64]string{} // token → "partition@scn"
	pids := make([]int, 0, len(parts))
	for p := range parts {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	for _, p := range pids {
		var prev *changeEntry
		for _, en := range parts[p] {
			where := fmt.Sprintf("partition %d at %s", p, en.scn)
			switch {
			case prev == nil && en.seq != 1:
				violation("%s: the log starts at sequence %d, not 1 (a gap before it)", where, en.seq)
			case prev != nil && en.seq == prev.seq:
				violation("%s: duplicate of sequence %d (%s)", where, en.seq, prev.scn)
			case prev != nil && en.seq < prev.seq:
				violation("%s: sequence goes back from %s", where, prev.scn)
			case prev != nil && en.seq > prev.seq+1:
				violation("%s: gap after %s (%d sequences missing)", where, prev.scn, en.seq-prev.seq-1)
			}
			if prev != nil && en.gen < prev.gen {
				violation("%s: generation goes back from %s", where, prev.scn)
			}
			if last := en.events[len(en.events)-1]; !last.TxnEnd {
				violation("%s: the stream stopped inside the transaction (no txnEnd)", where)
			}
			prev = en
			// The entry is one attempted transaction, whole.
			var tok int64
			var puts []string
			for i, ev := range en.events {
				t, ok := lineToken(ev)
				if !ok || ev.Op == "delete" {
					violation("%s: event %s %v %s without a token", where, ev.Table, ev.Key, ev.Op)
					continue
				}
				if i > 0 && t != tok {
					violation("%s: events of transactions %d and %d share one SCN", where, tok, t)
				}
				tok = t
				if len(ev.Key) == 2 {
					id, _ := num(ev.Key[1])
					puts = append(puts, fmt.Sprintf("%s/%d", ev.Table, id))
				}
			}
			sort.Strings(puts)
			att, ok := attempts[tok]
			switch {
			case !ok:
				violation("%s: transaction %d was never attempted (phantom)", where, tok)
				continue
			case att.Outcome == Failed:
				violation("%s: transaction %d is in the log but was refused (%s)", where, tok, att.Error)
			}
			in := att.Input.(txnInput)
			if strings.Join(puts, ",") != strings.Join(in.Puts, ",") {
				violation("%s: transaction %d shows writes %v, it made %v", where, tok, puts, in.Puts)
			}
			if len(en.events) > 0 && len(en.events[0].Key) > 0 && fmt.Sprint(en.events[0].Key[0]) != in.Group {
				violation("%s: transaction %d in group %v, it was sent to %s", where, tok, en.events[0].Key[0], in.Group)
			}
			if at, dup := seenAt[tok]; dup {
				violation("%s: transaction %d appears again (first at %s)", where, tok, at)
			}
			seenAt[tok] = where
			if scn, _ := att.Output.(string); att.Outcome == Acked && scn != "" && scn != en.scn {
				violation("%s: transaction %d was acknowledged at SCN %s", where, tok, scn)
			}
		}
	}
	var lost []string
	for tok, op := range attempts {
		if _, ok := seenAt[tok]; op.Outcome == Acked && !ok {
			lost = append(lost, fmt.Sprintf("%d (group %s, SCN %v)", tok, op.Key, op.Output))
		}
	}
	sort.Strings(lost)
	if len(lost) > 0 {
		res.Lost += len(lost)
		res.Failures = append(res.Failures, fmt.Sprintf("changelog: %d acknowledged transactions missing from the stream: %v", len(lost), firstN(lost, 20)))
	}
	return res
}

// History is the run's recorded history (nil before Run).
func (w *Changelog) History() *History { return w.hist }
