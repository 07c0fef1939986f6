package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Register is the linearizable-register workload: concurrent clients read,
// write and compare-and-set (If-Match with the ETag just read) a few
// single-document registers; the history of each key must be linearizable
// (checked with Porcupine). As in Jepsen's independent keys, the clients
// move to fresh registers every Window, so each key's history stays small
// enough for Porcupine even with many indeterminate operations (each may
// linearize anywhere after its call, and the search grows with them).
type Register struct {
	// Keys, Clients: the registers in use at a time and the concurrent
	// clients (defaults 5, 10).
	Keys, Clients int
	// Window is how long a set of registers is used (default 2 s).
	Window time.Duration
	// CheckTimeout bounds Porcupine per key (default 20 s); a key it cannot
	// decide in time is reported as a failure, not as passing.
	CheckTimeout time.Duration

	hist *History
}

const registerDB = "torture_register"

const registerTable = `{"key":[{"name":"k","type":"string"}],
 "schema":{"type":"record","name":"Register","fields":[{"name":"v","type":"long","default":0}]}}`

// Name implements Workload.
func (w *Register) Name() string { return "register" }

func (w *Register) defaults() {
	if w.Keys == 0 {
		w.Keys = 5
	}
	if w.Clients == 0 {
		w.Clients = 10
	}
	if w.CheckTimeout == 0 {
		w.CheckTimeout = 20 * time.Second
	}
	if w.Window == 0 {
		w.Window = 2 * time.Second
	}
}

func registerKey(window, i int) string { return fmt.Sprintf("r%d-%d", window, i) }

// Setup implements Workload: the database (registers start absent).
func (w *Register) Setup(ctx context.Context, t Target) error {
	w.defaults()
	c, err := setupDatabase(ctx, t, 1, registerDB, map[string]string{"Register": registerTable})
	if err != nil {
		return err
	}
	for i := range w.Keys {
		if _, err := c.Retry(ctx, "GET", w.path(registerKey(0, i)), nil, 200, 404); err != nil {
			return err
		}
	}
	return nil
}

// Run implements Workload.
func (w *Register) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	start := time.Now()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		k := registerKey(int(time.Since(start)/w.Window), c.rng.IntN(w.Keys))
		// Unique values: a read names the write it saw.
		val := int64(c.ID+1)*1_000_000_000 + seq
		switch c.rng.IntN(3) {
		case 0:
			w.read(ctx, c, k)
		case 1:
			w.write(ctx, c, k, val)
		case 2:
			if cur, etag, ok, _ := w.read(ctx, c, k); ok {
				w.cas(ctx, c, k, cur, etag, val)
			}
		}
	})
}

func (w *Register) path(k string) string { return "/" + registerDB + "/Register/" + k }

// read records a read and returns the value and ETag it saw; answered
// is false when no answer came (a 404 is an answer without a value).
func (w *Register) read(ctx context.Context, c *Client, k string) (v int64, etag string, ok, answered bool) {
	op := w.hist.Invoke(c.ID, "read", k, false, registerInput{Kind: "read"})
	resp, err := c.Do(ctx, "GET", w.path(k), nil)
	out := registerOutput{}
	if err == nil {
		out.Status = resp.Status
	}
	outcome := Classify(false, resp, err)
	var doc struct {
		V any `json:"v"`
	}
	switch {
	case outcome == Acked && resp.Decode(&doc) == nil:
		v, ok := num(doc.V)
		if !ok {
			w.hist.Complete(op, Failed, out, fmt.Errorf("read %s: no value in %s", k, resp.Body))
			return 0, "", false, false
		}
		out.Value = v
		w.hist.Complete(op, Acked, out, nil)
		return v, resp.Header.Get("ETag"), true, true
	case err == nil && resp.Status == 404:
		// Not written yet (or lost): a definite observation.
		out.Absent = true
		w.hist.Complete(op, Acked, out, nil)
		return 0, "", false, true
	default:
		w.hist.Complete(op, Failed, out, describe(resp, err))
	}
	return 0, "", false, false
}

func (w *Register) write(ctx context.Context, c *Client, k string, v int64) {
	op := w.hist.Invoke(c.ID, "write", k, true, registerInput{Kind: "write", Value: v})
	resp, err := c.Do(ctx, "PUT", w.path(k), map[string]any{"v": v})
	w.complete(op, resp, err)
}

func (w *Register) cas(ctx context.Context, c *Client, k string, from int64, etag string, to int64) {
	op := w.hist.Invoke(c.ID, "cas", k, true, registerInput{Kind: "cas", From: from, To: to})
	resp, err := c.Do(ctx, "PUT", w.path(k), map[string]any{"v": to}, "If-Match", etag)
	w.complete(op, resp, err)
}

func (w *Register) complete(op *Op, resp *Response, err error) {
	out := registerOutput{}
	if err == nil {
		out.Status = resp.Status
	}
	w.hist.Complete(op, Classify(true, resp, err), out, describe(resp, err))
}

// Check implements Workload: Porcupine per key; on a violation,
// register-<key>.html (Porcupine's visualization) and
// register-<key>-minimal.jsonl (the smallest failing history found).
func (w *Register) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"register: Check before Run"}}
	}
	// A final read of every register once the cluster healed joins the
	// history: a write lost at the end shows there.
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(3, 4)))
	var unread []string
	keys := map[string]bool{}
	for _, op := range w.hist.Ops() {
		keys[op.Key] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		for {
			if _, _, _, answered := w.read(ctx, c, k); answered || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if ctx.Err() != nil {
			unread = append(unread, k)
		}
	}
	res := w.hist.result(w.Name())
	if len(unread) > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("register: final reads of %v not answered before the check's deadline", unread))
	}
	return judgeRegisters(res, w.hist.Ops(), dir, w.CheckTimeout)
}

// judgeRegisters fills res from the per-key verdicts.
func judgeRegisters(res Result, ops []Op, dir string, timeout time.Duration) Result {
	for _, v := range checkRegisters(ops, dir, timeout) {
		switch v.Result {
		case porcupine.Ok:
		case porcupine.Illegal:
			res.Violations++
			msg := fmt.Sprintf("register %s: not linearizable (%d operations; a minimal failing history has %d)", v.Key, v.Ops, len(v.Minimal))
			for _, op := range v.Minimal {
				msg += "\n  " + describeOp(op)
			}
			res.Failures = append(res.Failures, msg)
			if v.Visual != "" {
				res.Artifacts = append(res.Artifacts, v.Visual)
			}
			if dir != "" {
				p := filepath.Join(dir, "register-"+v.Key+"-minimal.jsonl")
				if WriteJSONL(p, v.Minimal) == nil {
					res.Artifacts = append(res.Artifacts, p)
				}
				p = filepath.Join(dir, "register-"+v.Key+"-history.jsonl")
				if WriteJSONL(p, v.All) == nil {
					res.Artifacts = append(res.Artifacts, p)
				}
			}
		default:
			res.Failures = append(res.Failures, fmt.Sprintf("register %s: Porcupine could not decide linearizability of %d operations within %s", v.Key, v.Ops, timeout))
		}
	}
	return res
}

// describeOp is one line of a failing history.
func describeOp(op Op) string {
	end := fmt.Sprintf("%.3fs", op.Complete.Seconds())
	if op.Outcome == Indeterminate {
		end = "∞"
	}
	return fmt.Sprintf("[%.3fs, %s] client %d %s %s %+v -> %s %+v %s", op.Invoke.Seconds(), end, op.Client, op.Kind, op.Key, op.Input, op.Outcome, op.Output, op.Error)
}

// History is the run's recorded history (nil before Run).
func (w *Register) History() *History { return w.hist }
