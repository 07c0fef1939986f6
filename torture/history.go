package torture

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// Outcome is what a client knows about an operation once it completed.
type Outcome int

const (
	// Pending: invoked, not completed yet (only while a run is going on).
	Pending Outcome = iota
	// Acked: the server acknowledged the operation; its effect happened.
	Acked
	// Failed: the operation definitely had no effect (a 4xx such as 412, 404,
	// 409; a refused connection; a read that got no answer).
	Failed
	// Indeterminate: the effect may or may not have happened (a timeout, a
	// reset connection, a 5xx).
	Indeterminate
)

func (o Outcome) String() string {
	switch o {
	case Acked:
		return "ok"
	case Failed:
		return "fail"
	case Indeterminate:
		return "info"
	}
	return "pending"
}

// MarshalJSON writes the outcome as its name.
func (o Outcome) MarshalJSON() ([]byte, error) { return json.Marshal(o.String()) }

// UnmarshalJSON reads an outcome's name.
func (o *Outcome) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for _, c := range []Outcome{Pending, Acked, Failed, Indeterminate} {
		if c.String() == s {
			*o = c
			return nil
		}
	}
	return fmt.Errorf("unknown outcome %q", s)
}

// Op is one recorded operation. Times are offsets from the start of the
// history, so two histories of a run compare directly.
type Op struct {
	Index   int     `json:"index"`
	Client  int     `json:"client"`
	Kind    string  `json:"kind"` // "read", "write", "cas", "transfer", "inc", "insert", "txn"
	Key     string  `json:"key,omitempty"`
	Input   any     `json:"input,omitempty"`
	Output  any     `json:"output,omitempty"`
	Outcome Outcome `json:"outcome"`
	// Write is true for operations that change state when they succeed;
	// the longest window without an acknowledged write counts these.
	Write    bool          `json:"write,omitempty"`
	Invoke   time.Duration `json:"invoke"`
	Complete time.Duration `json:"complete"`
	// Error is the reason of a failed or indeterminate outcome.
	Error string `json:"error,omitempty"`
}

// History records operations from concurrent clients. The zero value is not
// usable; call NewHistory.
type History struct {
	start time.Time
	mu    sync.Mutex
	ops   []*Op
	end   time.Duration // when Close was called; 0 while running
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Invoke records the invocation of an operation and returns it; the caller
// completes it with Complete.
func (h *History) Invoke(client int, kind, key string, write bool, input any) *Op {
	now := time.Since(h.start)
	h.mu.Lock()
	defer h.mu.Unlock()
	op := &Op{Index: len(h.ops), Client: client, Kind: kind, Key: key, Write: write, Input: input, Invoke: now}
	h.ops = append(h.ops, op)
	return op
}

// Complete records how op ended. An operation completes once.
func (h *History) Complete(op *Op, outcome Outcome, output any, err error) {
	now := time.Since(h.start)
	h.mu.Lock()
	defer h.mu.Unlock()
	if op.Outcome != Pending {
		panic(fmt.Sprintf("torture: operation %d completed twice", op.Index))
	}
	op.Outcome, op.Output, op.Complete = outcome, output, now
	if err != nil {
		op.Error = err.Error()
	}
}

// Close marks the end of the run: operations still pending become
// indeterminate (their clients gave up) and the write-gap window ends here.
func (h *History) Close() {
	now := time.Since(h.start)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.end = now
	for _, op := range h.ops {
		if op.Outcome == Pending {
			op.Outcome, op.Complete, op.Error = Indeterminate, now, "still pending at the end of the run"
		}
	}
}

// Ops returns a copy of every operation, in invocation order.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Op, len(h.ops))
	for i, op := range h.ops {
		out[i] = *op
	}
	return out
}

// Counts are the totals a Result reports.
func (h *History) Counts() (attempted, acknowledged, indeterminate int) {
	return countOps(h.Ops())
}

func countOps(ops []Op) (attempted, acknowledged, indeterminate int) {
	for _, op := range ops {
		attempted++
		switch op.Outcome {
		case Acked:
			acknowledged++
		case Indeterminate, Pending:
			indeterminate++
		}
	}
	return
}

// LongestWriteGap is the longest stretch between the start of the history,
// the acknowledgements of writes and its end (Close, or now while running)
// in which no write was acknowledged.
func (h *History) LongestWriteGap() time.Duration {
	h.mu.Lock()
	end := h.end
	h.mu.Unlock()
	if end == 0 {
		end = time.Since(h.start)
	}
	return longestWriteGap(h.Ops(), end)
}

func longestWriteGap(ops []Op, end time.Duration) time.Duration {
	var acks []time.Duration
	for _, op := range ops {
		if op.Write && op.Outcome == Acked {
			acks = append(acks, op.Complete)
		}
	}
	sort.Slice(acks, func(i, j int) bool { return acks[i] < acks[j] })
	var longest, prev time.Duration
	for _, t := range append(acks, end) {
		longest = max(longest, t-prev)
		prev = max(prev, t)
	}
	return longest
}

// WriteJSONL writes one operation per line to path.
func WriteJSONL(path string, ops []Op) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for i := range ops {
		if err := enc.Encode(&ops[i]); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// result starts a Result from a closed history.
func (h *History) result(name string) Result {
	a, k, i := h.Counts()
	return Result{Workload: name, Attempted: a, Acknowledged: k, Indeterminate: i, LongestWriteGap: h.LongestWriteGap()}
}

// Summary counts operations by kind and outcome and names the commonest
// reasons of failed and indeterminate ones: one paragraph for a report.
func Summary(ops []Op) string {
	type ko struct {
		kind    string
		outcome Outcome
	}
	counts := map[ko]int{}
	reasons := map[string]int{}
	for _, op := range ops {
		counts[ko{op.Kind, op.Outcome}]++
		if op.Error != "" {
			r := op.Error
			if len(r) > 70 {
				r = r[:70]
			}
			reasons[op.Outcome.String()+": "+r]++
		}
	}
	var lines []string
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%s %s %d", k.kind, k.outcome, n))
	}
	sort.Strings(lines)
	var rs []string
	for r := range reasons {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool {
		return reasons[rs[i]] > reasons[rs[j]] || reasons[rs[i]] == reasons[rs[j]] && rs[i] < rs[j]
	})
	out := strings.Join(lines, ", ")
	for i, r := range rs {
		if i == 5 {
			break
		}
		out += fmt.Sprintf("\n  %d× %s", reasons[r], r)
	}
	return out
}

// groupByKey splits ops by key, each key's operations in their order in
// ops, and returns the keys sorted so that checks report in a stable order.
func groupByKey(ops []Op) (keys []string, byKey map[string][]Op) {
	byKey = map[string][]Op{}
	for _, op := range ops {
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	keys = make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, byKey
}
