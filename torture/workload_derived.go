package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/client/wire"
)

// Derived is the derived-table workload (docs/design/derived.md): a
// pusher builds versions of a derived table with the Go builder and
// pushes them (some staged with no-swap and swapped later), rolls back
// and rolls forward, while readers read one document, one document group
// or a query over every partition through any node, recording each
// answer and the version its X-Doppio-Version names. Version n's
// documents are a function of n (derivedHolds, derivedX), so the checker
// holds that
//
//   - every answer belongs to exactly the version it names, whole;
//   - a reader's versions never go back except through a rollback the
//     pusher performed, or before the move to the newer one was seen
//     announced (a node may serve the previous version until then);
//   - once a move is seen announced, every read that starts before the
//     next move answers from the version it made current: the swap waited
//     for every replica, and every live node serves it.
//
// One reader reads followers (X-Doppio-Staleness); its answers are held
// to the first rule only, since a bounded-stale read may lag a swap.
type Derived struct {
	// Readers, Groups: defaults 4, 6.
	Readers, Groups int

	hist   *History
	builds string // the builds' directory, removed by Check
	pushes int    // builds made so far
	// harness lists the workload's own errors; they fail the run.
	harness []string
}

const (
	derivedDB       = "torture_derived"
	derivedIDs      = 12
	derivedAnnounce = 15 * time.Second // a move's wait for its announcement
)

const derivedTable = `{"kind":"derived","key":[{"name":"g","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Entry","fields":[{"name":"v","type":"long"},{"name":"x","type":"long"}]}}`

// derivedHolds reports whether version n holds document (g, id): about
// three in four, a different set for consecutive versions.
func derivedHolds(n, g, id int) bool { return (id*5+g*3+n*7)%4 != 0 }

// derivedX is document (g, id)'s x in version n.
func derivedX(n, g, id int) int64 { return int64(n)*1_000_000 + int64(g)*1000 + int64(id) }

// Name implements Workload.
func (w *Derived) Name() string { return "derived" }

func (w *Derived) defaults() {
	if w.Readers == 0 {
		w.Readers = 4
	}
	if w.Groups == 0 {
		w.Groups = 6
	}
}

func (w *Derived) status(ctx context.Context, c *Client) (wire.DerivedTable, bool) {
	var st wire.DerivedTable
	resp, err := c.Do(ctx, "GET", "/_derived/"+derivedDB+"/Entry", nil)
	if err != nil || resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &st) != nil {
		return st, false
	}
	return st, true
}

// build writes version n's build and returns its directory.
func (w *Derived) build(ctx context.Context, n int) (string, error) {
	w.pushes++
	return buildTable(ctx, filepath.Join(w.builds, fmt.Sprintf("push-%d", w.pushes)), derivedDB, "Entry", derivedTable, func(out io.Writer) {
		for g := range w.Groups {
			for id := range derivedIDs {
				if derivedHolds(n, g, id) {
					fmt.Fprintf(out, `{"g":"g%d","id":%d,"v":%d,"x":%d}`+"\n", g, id, n, derivedX(n, g, id))
				}
			}
		}
	})
}

// Setup implements Workload: the table, and version 1 current.
func (w *Derived) Setup(ctx context.Context, t Target) error {
	w.defaults()
	c, err := setupDatabase(ctx, t, 23, derivedDB, map[string]string{"Entry": derivedTable})
	if err != nil {
		return err
	}
	if w.builds, err = os.MkdirTemp("", "doppio-torture-derived-"); err != nil {
		return err
	}
	dir, err := w.build(ctx, 1)
	if err != nil {
		return err
	}
	// A retried push whose first attempt landed is refused naming it.
	if _, err := c.Retry(ctx, "POST", "/_derived/"+derivedDB+"/Entry/versions", map[string]any{"source": dir}, http.StatusAccepted, http.StatusConflict); err != nil {
		return err
	}
	for {
		if st, ok := w.status(ctx, c); ok && st.Current == 1 && st.Announced {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("derived: version 1 not current and announced: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// derivedMove is a pusher operation's input: the current version it
// started from, and the version it pushed (push, stage).
type derivedMove struct {
	From    int `json:"from"`
	Version int `json:"version,omitempty"`
}

// derivedRead is a read's input.
type derivedRead struct {
	What  string `json:"what"` // "get", "group" or "query"
	G     int    `json:"g"`
	ID    int    `json:"id"`
	Stale bool   `json:"stale,omitempty"`
}

// derivedAnswer is a read's output: the version named, the status and
// the documents answered.
type derivedAnswer struct {
	Version int          `json:"version"`
	Status  int          `json:"status"`
	Docs    []derivedDoc `json:"docs"`
	Partial bool         `json:"partial,omitempty"`
}

type derivedDoc struct {
	G     int   `json:"g"`
	ID    int   `json:"id"`
	V     int64 `json:"v"`
	X     int64 `json:"x"`
	Wrong bool  `json:"wrong,omitempty"` // a key or field that does not parse
}

// Run implements Workload: client 0 pushes and moves versions, the others
// read.
func (w *Derived) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, 1+w.Readers, &w.hist, func(c *Client, seq int64) {
		if c.ID == 0 {
			w.step(ctx, c)
			return
		}
		w.read(ctx, c, c.ID == 1)
	})
}

// step does the pusher's next operation, chosen from the table's state:
// swap a staged version in, wait for a fetching one, or push, roll back
// or roll forward.
func (w *Derived) step(ctx context.Context, c *Client) {
	st, ok := w.status(ctx, c)
	if !ok {
		sleepCtx(ctx, 100*time.Millisecond)
		return
	}
	older, newer := false, false
	for _, v := range st.Versions {
		switch v.State {
		case wire.VersionStaged:
			w.move(ctx, c, "swap", st.Current)
			return
		case wire.VersionFetching:
			sleepCtx(ctx, 100*time.Millisecond)
			return
		case wire.VersionBackup:
			older = older || v.Version < st.Current
			newer = newer || v.Version > st.Current
		}
	}
	switch r := c.rng.IntN(10); {
	case r < 2 && older:
		w.move(ctx, c, "rollback", st.Current)
	case r < 4 && newer:
		w.move(ctx, c, "roll-forward", st.Current)
	default:
		w.push(ctx, c, st.Current, r >= 8)
	}
}

// push builds and pushes the next version (staged only when noSwap) and
// follows it until it is current, staged or failed.
func (w *Derived) push(ctx context.Context, c *Client, from int, noSwap bool) {
	st, ok := w.status(ctx, c)
	if !ok {
		return
	}
	n := 1
	for _, v := range st.Versions {
		n = max(n, v.Version+1)
	}
	// The server numbers a push after the highest version it lists (the
	// newest stays listed, and numbers are never reused), so the build
	// names the number the push gets.
	dir, err := w.build(ctx, n)
	if err != nil {
		return
	}
	kind := "push"
	if noSwap {
		kind = "stage"
	}
	op := w.hist.Invoke(c.ID, kind, "", true, derivedMove{From: from, Version: n})
	outcome := w.request(ctx, c, op, "versions", map[string]any{"source": dir, "noSwap": noSwap})
	if outcome == Failed {
		return
	}
	got := 0
	w.follow(ctx, c, func(st wire.DerivedTable) bool {
		for _, v := range st.Versions {
			if v.Source == dir {
				got = v.Version
				done := v.State == wire.VersionCurrent || v.State == wire.VersionBackup || v.State == wire.VersionFailed || v.State == wire.VersionDeleting
				return done || (noSwap && v.State == wire.VersionStaged)
			}
		}
		return outcome == Indeterminate // not recorded: it never will be
	}, op, outcome)
	if got != 0 && got != n {
		// Its documents say n: the reads of it would be misjudged.
		w.harness = append(w.harness, fmt.Sprintf("derived: built version %d, the server numbered it %d", n, got))
	}
}

// move swaps, rolls back or rolls forward, and follows the table until
// the move is announced.
func (w *Derived) move(ctx context.Context, c *Client, verb string, from int) {
	op := w.hist.Invoke(c.ID, verb, "", true, derivedMove{From: from})
	if outcome := w.request(ctx, c, op, verb, nil); outcome != Failed {
		w.follow(ctx, c, func(wire.DerivedTable) bool { return true }, op, outcome)
	}
}

// request sends a pusher's POST to /_derived/{db}/Entry/{path} with more
// time than a document's, and returns its outcome, having completed op
// when it was refused.
func (w *Derived) request(ctx context.Context, c *Client, op *Op, path string, body any) Outcome {
	c.Timeout = 10 * time.Second
	resp, err := c.Do(ctx, "POST", "/_derived/"+derivedDB+"/Entry/"+path, body)
	c.Timeout = DefaultTimeout
	outcome := Classify(true, resp, err)
	switch outcome {
	case Failed:
		w.hist.Complete(op, Failed, nil, describe(resp, err))
	case Indeterminate:
		// Whatever it did is done once the server's deadline passed, so
		// the state followed next is after it.
		sleepCtx(ctx, 8*time.Second)
	}
	return outcome
}

// follow polls the table until done says so and the state is announced,
// then completes op with the current version it saw announced (nil when
// it gave up first).
func (w *Derived) follow(ctx context.Context, c *Client, done func(wire.DerivedTable) bool, op *Op, outcome Outcome) {
	deadline := time.Now().Add(derivedAnnounce)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		if st, ok := w.status(ctx, c); ok && st.Announced && done(st) {
			w.hist.Complete(op, outcome, int64(st.Current), nil)
			return
		}
		sleepCtx(ctx, 50*time.Millisecond)
	}
	w.hist.Complete(op, outcome, nil, fmt.Errorf("not seen announced within %v", derivedAnnounce))
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// read records one read through a random node.
func (w *Derived) read(ctx context.Context, c *Client, stale bool) {
	in := derivedRead{G: c.rng.IntN(w.Groups), ID: c.rng.IntN(derivedIDs), Stale: stale}
	path := fmt.Sprintf("/%s/Entry/g%d", derivedDB, in.G)
	switch r := c.rng.IntN(10); {
	case r < 5:
		in.What = "get"
		path += "/" + strconv.Itoa(in.ID)
	case r < 8:
		in.What, path = "group", path+"?limit=500"
	default:
		in.What, path = "query", "/"+derivedDB+"/Entry?query=*&limit=500"
	}
	op := w.hist.Invoke(c.ID, "read", "", false, in)
	var header []string
	if stale {
		header = []string{"X-Doppio-Staleness", "5s"}
	}
	resp, err := c.Do(ctx, "GET", path, nil, header...)
	ans, ok := derivedParse(in, resp, err)
	if !ok {
		w.hist.Complete(op, Failed, nil, describe(resp, err))
		return
	}
	w.hist.Complete(op, Acked, ans, nil)
}

// derivedParse reads an answer: ok when it is an observation (200, or a
// 404 naming a version).
func derivedParse(in derivedRead, resp *Response, err error) (derivedAnswer, bool) {
	if err != nil || (resp.Status != http.StatusOK && resp.Status != http.StatusNotFound) {
		return derivedAnswer{}, false
	}
	v, verr := strconv.Atoi(resp.Header.Get("X-Doppio-Version"))
	if verr != nil {
		return derivedAnswer{}, false
	}
	ans := derivedAnswer{Version: v, Status: resp.Status, Docs: []derivedDoc{}}
	if resp.Status != http.StatusOK {
		return ans, true
	}
	if in.What == "get" {
		var d struct{ V, X any }
		if resp.Decode(&d) != nil {
			ans.Docs = append(ans.Docs, derivedDoc{Wrong: true})
			return ans, true
		}
		dv, ok1 := num(d.V)
		dx, ok2 := num(d.X)
		ans.Docs = append(ans.Docs, derivedDoc{G: in.G, ID: in.ID, V: dv, X: dx, Wrong: !ok1 || !ok2})
		return ans, true
	}
	var page struct {
		Documents []struct {
			Key      []any `json:"key"`
			Document struct{ V, X any }
		} `json:"documents"`
		Next string `json:"next"`
	}
	if resp.Decode(&page) != nil {
		ans.Docs = append(ans.Docs, derivedDoc{Wrong: true})
		return ans, true
	}
	ans.Partial = page.Next != ""
	for _, d := range page.Documents {
		doc := derivedDoc{Wrong: len(d.Key) != 2}
		if !doc.Wrong {
			gs, _ := d.Key[0].(string)
			g, gerr := strconv.Atoi(gs[min(1, len(gs)):])
			id, ok1 := num(d.Key[1])
			dv, ok2 := num(d.Document.V)
			dx, ok3 := num(d.Document.X)
			doc = derivedDoc{G: g, ID: int(id), V: dv, X: dx, Wrong: gerr != nil || len(gs) < 2 || !ok1 || !ok2 || !ok3}
		}
		ans.Docs = append(ans.Docs, doc)
	}
	return ans, true
}

// derivedWant is what version n answers to a read.
func derivedWant(in derivedRead, n, groups int) []derivedDoc {
	out := []derivedDoc{}
	for g := range groups {
		if in.What != "query" && g != in.G {
			continue
		}
		for id := range derivedIDs {
			if (in.What != "get" || id == in.ID) && derivedHolds(n, g, id) {
				out = append(out, derivedDoc{G: g, ID: id, V: int64(n), X: derivedX(n, g, id)})
			}
		}
	}
	return out
}

// derivedWrong says what is wrong with an answer, if anything: it must be
// exactly its version's.
func derivedWrong(in derivedRead, a derivedAnswer, groups int) string {
	want := derivedWant(in, a.Version, groups)
	got := slices.Clone(a.Docs)
	slices.SortFunc(got, func(x, y derivedDoc) int { return (x.G*derivedIDs + x.ID) - (y.G*derivedIDs + y.ID) })
	switch {
	case a.Partial:
		return fmt.Sprintf("%d documents and more pages, want %d on one", len(got), len(want))
	case a.Status == http.StatusNotFound && len(want) > 0:
		return fmt.Sprintf("404, but version %d holds it", a.Version)
	case a.Status == http.StatusNotFound:
		return ""
	case !slices.Equal(got, want):
		return fmt.Sprintf("answered %v, version %d holds %v", got, a.Version, want)
	}
	return ""
}

// Check implements Workload: once the table's state is announced, a query
// through every node must answer the current version whole; then every
// recorded read is judged.
func (w *Derived) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	defer os.RemoveAll(w.builds)
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"derived: Check before Run"}}
	}
	res := w.hist.result(w.Name())
	res.Failures = append(res.Failures, w.harness...)
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(29, 30)))
	var final wire.DerivedTable
	for {
		if st, ok := w.status(ctx, c); ok && st.Announced {
			final = st
			break
		}
		if ctx.Err() != nil {
			res.Failures = append(res.Failures, "derived: the table's state was not announced before the check's deadline")
			return res
		}
		time.Sleep(100 * time.Millisecond)
	}
	in := derivedRead{What: "query"}
	for i := range t.Endpoints() {
		var resp *Response
		var err error
		for ctx.Err() == nil {
			if resp, err = c.DoAt(ctx, i, "GET", "/"+derivedDB+"/Entry?query=*&limit=500", nil); err == nil && resp.Status == http.StatusOK {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if resp == nil && err == nil {
			err = ctx.Err()
		}
		a, ok := derivedParse(in, resp, err)
		switch {
		case !ok:
			res.Failures = append(res.Failures, fmt.Sprintf("derived: final query through node %d not answered: %v", i+1, describe(resp, err)))
		case a.Version != final.Current:
			res.Violations++
			res.Failures = append(res.Failures, fmt.Sprintf("derived: final query through node %d answered version %d; version %d is current and announced", i+1, a.Version, final.Current))
		default:
			if wrong := derivedWrong(in, a, w.Groups); wrong != "" {
				res.Violations++
				res.Failures = append(res.Failures, fmt.Sprintf("derived: final query through node %d: %s", i+1, wrong))
			}
		}
	}
	res = judgeDerived(res, w.hist.Ops(), w.Groups)
	if !res.OK() && dir != "" {
		p := dir + "/derived-history.jsonl"
		if WriteJSONL(p, w.hist.Ops()) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

// judgeDerived holds every recorded read to the three rules of Derived.
func judgeDerived(res Result, ops []Op, groups int) Result {
	violation := func(format string, args ...any) {
		res.Violations++
		if len(res.Failures) < 50 {
			res.Failures = append(res.Failures, "derived: "+fmt.Sprintf(format, args...))
		}
	}
	var moves []Op
	readers := map[int][]Op{}
	for _, op := range ops {
		switch {
		case op.Kind != "read":
			moves = append(moves, op)
		case op.Outcome == Acked:
			readers[op.Client] = append(readers[op.Client], op)
		}
	}
	// Rule 1: each answer is exactly its version's.
	for _, rs := range readers {
		for _, r := range rs {
			in, a := r.Input.(derivedRead), r.Output.(derivedAnswer)
			if wrong := derivedWrong(in, a, groups); wrong != "" {
				violation("read %d (%s g%d/%d, client %d, %.3fs–%.3fs): %s", r.Index, in.What, in.G, in.ID, r.Client, r.Invoke.Seconds(), r.Complete.Seconds(), wrong)
			}
		}
	}
	// moving reports whether a move from version v (a swap, push,
	// rollback or roll-forward) was under way when r began: not yet seen
	// announced, so a node may still serve v.
	moving := func(v int, r Op) bool {
		for _, m := range moves {
			_, seen := m.Output.(int64)
			if m.Kind != "stage" && m.Outcome != Failed && m.Input.(derivedMove).From == v && m.Invoke < r.Complete && (!seen || m.Complete > r.Invoke) {
				return true
			}
		}
		return false
	}
	// rolledBack reports whether a rollback may have taken effect after
	// a began and before b ended.
	rolledBack := func(a, b Op) bool {
		for _, m := range moves {
			_, seen := m.Output.(int64)
			if m.Kind == "rollback" && m.Outcome != Failed && m.Invoke < b.Complete && (!seen || m.Complete > a.Invoke) {
				return true
			}
		}
		return false
	}
	// Rule 2: a reader's versions go back only through a rollback, or to
	// the version a move under way leaves.
	for client, rs := range readers {
		if rs[0].Input.(derivedRead).Stale {
			continue
		}
		for i := 1; i < len(rs); i++ {
			a, b := rs[i-1], rs[i]
			va, vb := a.Output.(derivedAnswer).Version, b.Output.(derivedAnswer).Version
			if vb < va && !moving(vb, b) && !rolledBack(a, b) {
				violation("client %d read version %d at %.3fs, then version %d at %.3fs, with no rollback or move from it under way", client, va, a.Invoke.Seconds(), vb, b.Invoke.Seconds())
			}
		}
	}
	// Rule 3: between a move seen announced and the next move, every read
	// answers the version it made current.
	for i, m := range moves {
		cur, ok := m.Output.(int64)
		if !ok {
			continue
		}
		end := time.Duration(1<<63 - 1)
		for _, next := range moves[i+1:] {
			if next.Kind != "stage" && next.Outcome != Failed {
				end = next.Invoke
				break
			}
		}
		for _, rs := range readers {
			for _, r := range rs {
				if r.Input.(derivedRead).Stale || r.Invoke < m.Complete || r.Complete > end {
					continue
				}
				if v := r.Output.(derivedAnswer).Version; v != int(cur) {
					violation("read %d (client %d, %.3fs–%.3fs) answered version %d; version %d was current and announced at %.3fs", r.Index, r.Client, r.Invoke.Seconds(), r.Complete.Seconds(), v, cur, m.Complete.Seconds())
				}
			}
		}
	}
	return res
}

// History is the run's recorded history (nil before Run).
func (w *Derived) History() *History { return w.hist }
