package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
)

// Set is the append-only set workload: clients insert unique elements
// (If-None-Match: *) into a few document groups; at the end every
// acknowledged element must be present (else it is lost) and nothing may be
// present that was never attempted or was refused (a phantom).
type Set struct {
	// Groups, Clients: defaults 8, 8.
	Groups, Clients int

	hist *History
}

const setDB = "torture_set"

const setTable = `{"key":[{"name":"g","type":"string"},{"name":"id","type":"long"}],
 "schema":{"type":"record","name":"Element","fields":[{"name":"v","type":"long","default":0}]}}`

// Name implements Workload.
func (w *Set) Name() string { return "set" }

func (w *Set) defaults() {
	if w.Groups == 0 {
		w.Groups = 8
	}
	if w.Clients == 0 {
		w.Clients = 8
	}
}

func setGroup(i int) string { return fmt.Sprintf("g%d", i) }

// Setup implements Workload.
func (w *Set) Setup(ctx context.Context, t Target) error {
	w.defaults()
	c, err := setupDatabase(ctx, t, 9, setDB, map[string]string{"Element": setTable})
	if err != nil {
		return err
	}
	// Each group answers a read once its partition has a leader.
	for g := range w.Groups {
		if _, err := c.Retry(ctx, "GET", "/"+setDB+"/Element/"+setGroup(g), nil, 200); err != nil {
			return err
		}
	}
	return nil
}

// Run implements Workload.
func (w *Set) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		e := int64(c.ID+1)*1_000_000_000 + seq
		g := setGroup(c.rng.IntN(w.Groups))
		op := w.hist.Invoke(c.ID, "insert", g, true, e)
		resp, err := c.Do(ctx, "PUT", fmt.Sprintf("/%s/Element/%s/%d", setDB, g, e), map[string]any{"v": e}, "If-None-Match", "*")
		w.hist.Complete(op, Classify(true, resp, err), nil, describe(resp, err))
	})
}

// Check implements Workload: read every group in full, then compare.
func (w *Set) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"set: Check before Run"}}
	}
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(11, 12)))
	res := w.hist.result(w.Name())
	present := map[string]map[int64]int64{}
	for g := range w.Groups {
		els, err := readSetGroup(ctx, c, setGroup(g))
		if err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("set: final read of group %s: %v", setGroup(g), err))
			return res
		}
		present[setGroup(g)] = els
	}
	return judgeSet(res, w.hist.Ops(), present, dir)
}

// readSetGroup reads group g's whole collection, page by page, each page
// retried until answered.
func readSetGroup(ctx context.Context, c *Client, g string) (map[int64]int64, error) {
	out := map[int64]int64{}
	cursor := ""
	for {
		path := fmt.Sprintf("/%s/Element/%s?limit=1000", setDB, g)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, err := c.Retry(ctx, "GET", path, nil, 200)
		if err != nil {
			return nil, err
		}
		var page struct {
			Documents []struct {
				Key      []any `json:"key"`
				Document struct {
					V any `json:"v"`
				} `json:"document"`
			} `json:"documents"`
			Next string `json:"next"`
		}
		if err := resp.Decode(&page); err != nil {
			return nil, fmt.Errorf("page of %s: %w", g, err)
		}
		for _, d := range page.Documents {
			if len(d.Key) != 2 {
				return nil, fmt.Errorf("element key %v", d.Key)
			}
			id, ok1 := num(d.Key[1])
			v, ok2 := num(d.Document.V)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("element %v: %v", d.Key, d.Document)
			}
			out[id] = v
		}
		if page.Next == "" {
			return out, nil
		}
		cursor = page.Next
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// judgeSet compares the inserts with what is present per group.
func judgeSet(res Result, ops []Op, present map[string]map[int64]int64, dir string) Result {
	type attempt struct {
		group   string
		outcome Outcome
	}
	attempted := map[int64]attempt{}
	for _, op := range ops {
		if op.Kind == "insert" {
			e, _ := op.Input.(int64)
			attempted[e] = attempt{op.Key, op.Outcome}
		}
	}
	var lost, phantom []string
	for e, a := range attempted {
		_, ok := present[a.group][e]
		if a.outcome == Acked && !ok {
			lost = append(lost, fmt.Sprintf("%s/%d", a.group, e))
		}
	}
	for g, els := range present {
		for e, v := range els {
			a, ok := attempted[e]
			switch {
			case !ok || a.group != g:
				phantom = append(phantom, fmt.Sprintf("%s/%d was never inserted there", g, e))
			case a.outcome == Failed:
				phantom = append(phantom, fmt.Sprintf("%s/%d is present though its insert was refused", g, e))
			case v != e:
				phantom = append(phantom, fmt.Sprintf("%s/%d holds %d, not what was inserted", g, e, v))
			}
		}
	}
	sort.Strings(lost)
	sort.Strings(phantom)
	res.Lost += len(lost)
	res.Violations += len(phantom)
	if len(lost) > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("set: %d acknowledged inserts missing: %v", len(lost), firstN(lost, 20)))
	}
	if len(phantom) > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("set: %d elements present that should not be: %v", len(phantom), firstN(phantom, 20)))
	}
	if !res.OK() && dir != "" {
		p := dir + "/set-history.jsonl"
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("… %d more", len(s)-n))
	}
	return s
}

// History is the run's recorded history (nil before Run).
func (w *Set) History() *History { return w.hist }
