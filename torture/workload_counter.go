package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// Counter is the increment workload: clients send $inc patches to a few
// counters and read them. The final value of each counter must lie between
// the sum of acknowledged increments and that plus the indeterminate ones,
// and every read between what was acknowledged before it began and what
// was attempted (and not refused) before it ended.
type Counter struct {
	// Counters, Clients: defaults 3, 8.
	Counters, Clients int

	hist *History
}

const counterDB = "torture_counter"

const counterTable = `{"key":[{"name":"id","type":"string"}],
 "schema":{"type":"record","name":"Counter","fields":[{"name":"n","type":"long","default":0}]}}`

// Name implements Workload.
func (w *Counter) Name() string { return "counter" }

func (w *Counter) defaults() {
	if w.Counters == 0 {
		w.Counters = 3
	}
	if w.Clients == 0 {
		w.Clients = 8
	}
}

func counterKey(i int) string { return fmt.Sprintf("c%d", i) }

func (w *Counter) path(k string) string { return "/" + counterDB + "/Counter/" + k }

// Setup implements Workload: every counter at 0.
func (w *Counter) Setup(ctx context.Context, t Target) error {
	w.defaults()
	c, err := setupDatabase(ctx, t, 5, counterDB, map[string]string{"Counter": counterTable})
	if err != nil {
		return err
	}
	for i := range w.Counters {
		if _, err := c.Retry(ctx, "PUT", w.path(counterKey(i)), map[string]any{"n": 0}, 200, 201); err != nil {
			return err
		}
	}
	return nil
}

// Run implements Workload.
func (w *Counter) Run(ctx context.Context, t Target, rng *rand.Rand) error {
	w.defaults()
	return runClients(ctx, t, rng, w.Clients, &w.hist, func(c *Client, seq int64) {
		k := counterKey(c.rng.IntN(w.Counters))
		if c.rng.IntN(5) == 0 {
			w.read(ctx, c, k)
			return
		}
		d := int64(1 + c.rng.IntN(3))
		op := w.hist.Invoke(c.ID, "inc", k, true, d)
		resp, err := c.Do(ctx, "PATCH", w.path(k), map[string]any{"$inc": map[string]any{"n": d}})
		w.hist.Complete(op, Classify(true, resp, err), nil, describe(resp, err))
	})
}

// read records a read of counter k; ok when it was answered with a value.
func (w *Counter) read(ctx context.Context, c *Client, k string) bool {
	op := w.hist.Invoke(c.ID, "read", k, false, nil)
	resp, err := c.Do(ctx, "GET", w.path(k), nil)
	var doc struct {
		N any `json:"n"`
	}
	if Classify(false, resp, err) == Acked && resp.Decode(&doc) == nil {
		if n, ok := num(doc.N); ok {
			w.hist.Complete(op, Acked, n, nil)
			return true
		}
	}
	if err == nil && resp.Status == 404 {
		w.hist.Complete(op, Acked, nil, nil) // absent: a definite observation
		return true
	}
	w.hist.Complete(op, Failed, nil, describe(resp, err))
	return false
}

// Check implements Workload: a final read of each counter after the heal,
// then the bounds over every read.
func (w *Counter) Check(ctx context.Context, t Target, dir string) Result {
	w.defaults()
	if w.hist == nil {
		return Result{Workload: w.Name(), Failures: []string{"counter: Check before Run"}}
	}
	c := NewClient(-1, t.Endpoints(), newHTTPClient(t), rand.New(rand.NewPCG(7, 8)))
	res := w.hist.result(w.Name())
	for i := range w.Counters {
		k := counterKey(i)
		for !w.read(ctx, c, k) && ctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
		}
		if ctx.Err() != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("counter %s: final read not answered before the check's deadline", k))
		}
	}
	return judgeCounters(res, w.hist.Ops(), dir)
}

// judgeCounters checks every answered read of each counter, the last one
// being the final value: acknowledged increments completed before the read
// began must be in it (or they are lost), and it can hold no more than the
// increments invoked before it ended that were not refused.
func judgeCounters(res Result, ops []Op, dir string) Result {
	keys, byKey := groupByKey(ops)
	for _, k := range keys {
		kops := byKey[k]
		var last *Op
		for i := range kops {
			if r := &kops[i]; r.Kind == "read" && r.Outcome == Acked && (last == nil || r.Complete > last.Complete) {
				last = r
			}
		}
		for i := range kops {
			r := &kops[i]
			if r.Kind != "read" || r.Outcome != Acked {
				continue
			}
			got, present := r.Output.(int64)
			var lo, hi int64
			for _, inc := range kops {
				if inc.Kind != "inc" {
					continue
				}
				d, _ := inc.Input.(int64)
				if inc.Outcome == Acked && inc.Complete < r.Invoke {
					lo += d
				}
				if inc.Outcome != Failed && inc.Invoke < r.Complete {
					hi += d
				}
			}
			switch {
			case r == last && got < lo:
				// The final read, after the heal: what is missing is lost.
				res.Lost += int(lo - got)
				res.Failures = append(res.Failures, fmt.Sprintf("counter %s: final value %d, but %d was acknowledged (%d lost)", k, got, lo, lo-got))
			case !present:
				res.Violations++
				res.Failures = append(res.Failures, fmt.Sprintf("counter %s: read at %.3fs found no counter; %d was acknowledged before", k, r.Invoke.Seconds(), lo))
			case got < lo:
				res.Violations++
				res.Failures = append(res.Failures, fmt.Sprintf("counter %s: read at %.3fs saw %d, but %d was acknowledged before it began", k, r.Invoke.Seconds(), got, lo))
			case got > hi:
				res.Violations++
				res.Failures = append(res.Failures, fmt.Sprintf("counter %s: read at %.3fs saw %d, more than the %d attempted (and not refused) before it ended", k, r.Invoke.Seconds(), got, hi))
			}
		}
	}
	if !res.OK() && dir != "" {
		p := dir + "/counter-history.jsonl"
		if WriteJSONL(p, ops) == nil {
			res.Artifacts = append(res.Artifacts, p)
		}
	}
	return res
}

// History is the run's recorded history (nil before Run).
func (w *Counter) History() *History { return w.hist }
