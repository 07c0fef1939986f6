package torture

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/anishathalye/porcupine"
)

// registerInput is one register operation as the model sees it.
type registerInput struct {
	Kind  string `json:"kind"` // "read", "write", "cas"
	Value int64  `json:"value,omitempty"`
	From  int64  `json:"from,omitempty"`
	To    int64  `json:"to,omitempty"`
}

// registerOutput is what the client saw. Absent marks a read answered 404
// (the register must always exist once set up: the model rejects it).
type registerOutput struct {
	Value  int64 `json:"value,omitempty"`
	Absent bool  `json:"absent,omitempty"`
	// Status is the HTTP status; 0 when no answer came.
	Status int `json:"status,omitempty"`
}

// registerModel is a single register (one key: the history is partitioned
// by key before checking) holding an int64, initially absent (-1; written
// values are positive). Every operation is
// passed with its outcome, so an indeterminate write or compare-and-set may
// or may not take effect: it returns at infinity, and may be linearized
// after everything else, which is the same as never.
var registerModel = porcupine.Model{
	Init: func() any { return absent },
	Step: func(state, input, output any) (bool, any) {
		s := state.(int64)
		in := input.(registerInput)
		out := output.(registerStep)
		switch in.Kind {
		case "read":
			if out.Absent {
				return s == absent, s
			}
			return out.Value == s, s
		case "write":
			return true, in.Value
		case "cas":
			switch out.Outcome {
			case Acked:
				return s == in.From, in.To
			case Failed: // 412: the register did not hold From
				return s != in.From, s
			default:
				if s == in.From {
					return true, in.To
				}
				return true, s
			}
		}
		return false, s
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(registerInput), output.(registerStep)
		switch in.Kind {
		case "read":
			if out.Absent {
				return "read() -> absent"
			}
			return fmt.Sprintf("read() -> %d", out.Value)
		case "write":
			return fmt.Sprintf("write(%d) %s", in.Value, out.Outcome)
		}
		return fmt.Sprintf("cas(%d -> %d) %s", in.From, in.To, out.Outcome)
	},
	DescribeState: func(state any) string {
		if state.(int64) == absent {
			return "absent"
		}
		return fmt.Sprint(state.(int64))
	},
}

// absent is the state of a register never written.
const absent = int64(-1)

// registerStep is the model's output: the outcome and what was read.
type registerStep struct {
	Outcome Outcome
	Value   int64
	Absent  bool
}

// porcupineOps turns one key's recorded operations into Porcupine's
// history. Operations without an effect or an observation are left out
// (failed reads, writes refused before reaching a server); indeterminate
// ones return at infinity.
func porcupineOps(ops []Op) ([]porcupine.Operation, []Op) {
	var out []porcupine.Operation
	var kept []Op
	for _, op := range ops {
		in, ok := op.Input.(registerInput)
		if !ok {
			continue
		}
		res, _ := op.Output.(registerOutput)
		step := registerStep{Outcome: op.Outcome, Value: res.Value, Absent: res.Absent}
		ret := int64(op.Complete)
		switch op.Outcome {
		case Acked:
		case Failed:
			// Only a compare-and-set refused with 412 observed something.
			if in.Kind != "cas" || res.Status != 412 {
				continue
			}
		default:
			if in.Kind == "read" {
				continue
			}
			step.Outcome = Indeterminate
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{ClientId: op.Client, Input: in, Call: int64(op.Invoke), Output: step, Return: ret})
		kept = append(kept, op)
	}
	return out, kept
}

// keyVerdict is the linearizability verdict over one key's history.
type keyVerdict struct {
	Key     string
	Result  porcupine.CheckResult
	Ops     int
	Minimal []Op // a smallest failing sub-history found, when Illegal
	All     []Op // the key's whole history, when Illegal
	Visual  string
}

// checkRegisters checks each key's history for linearizability. On a
// violation it writes Porcupine's visualization and the minimal failing
// history under dir (when dir is not empty).
func checkRegisters(ops []Op, dir string, timeout time.Duration) []keyVerdict {
	keys, byKey := groupByKey(ops)
	var out []keyVerdict
	for _, k := range keys {
		hist, kept := porcupineOps(byKey[k])
		res, info := porcupine.CheckOperationsVerbose(registerModel, hist, timeout)
		v := keyVerdict{Key: k, Result: res, Ops: len(hist)}
		if res == porcupine.Illegal {
			v.Minimal = shrink(kept, 20*time.Second)
			v.All = byKey[k]
			if dir != "" {
				v.Visual = filepath.Join(dir, "register-"+k+".html")
				if err := porcupine.VisualizePath(registerModel, info, v.Visual); err != nil {
					v.Visual = ""
				}
			}
		}
		out = append(out, v)
	}
	return out
}

// shrink removes operations from a non-linearizable history one at a time
// while it stays non-linearizable, within budget: what is left is a
// history every operation of which matters to the violation. An operation
// that wrote a value another kept operation observed (a read of it, a
// compare-and-set from it) is kept: without it the history would fail for
// a new, uninteresting reason (a value from nowhere).
func shrink(ops []Op, budget time.Duration) []Op {
	deadline := time.Now().Add(budget)
	cur := append([]Op(nil), ops...)
	illegal := func(c []Op) bool {
		h, _ := porcupineOps(c)
		return porcupine.CheckOperationsTimeout(registerModel, h, time.Until(deadline)) == porcupine.Illegal
	}
	observed := func(c []Op, skip int) map[int64]bool {
		seen := map[int64]bool{}
		for j, op := range c {
			in, _ := op.Input.(registerInput)
			out, _ := op.Output.(registerOutput)
			switch {
			case j == skip:
			case in.Kind == "read" && op.Outcome == Acked && !out.Absent:
				seen[out.Value] = true
			case in.Kind == "cas":
				seen[in.From] = true
			}
		}
		return seen
	}
	for i := len(cur) - 1; i >= 0 && time.Now().Before(deadline); i-- {
		in, _ := cur[i].Input.(registerInput)
		seen := observed(cur, i)
		if (in.Kind == "write" && seen[in.Value]) || (in.Kind == "cas" && seen[in.To]) {
			continue
		}
		cand := append(append([]Op(nil), cur[:i]...), cur[i+1:]...)
		if illegal(cand) {
			cur = cand
		}
	}
	return cur
}
