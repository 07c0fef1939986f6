package torture

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/changes"
)

// synth builds a synthetic history: ops given with invoke/complete in
// milliseconds.
type synth struct{ ops []Op }

func (s *synth) add(client int, kind, key string, write bool, in, out any, outcome Outcome, from, to int) {
	s.ops = append(s.ops, Op{Index: len(s.ops), Client: client, Kind: kind, Key: key, Write: write, Input: in, Output: out,
		Outcome: outcome, Invoke: time.Duration(from) * time.Millisecond, Complete: time.Duration(to) * time.Millisecond})
}

func (s *synth) read(client int, key string, v int64, from, to int) {
	s.add(client, "read", key, false, registerInput{Kind: "read"}, registerOutput{Value: v, Status: 200}, Acked, from, to)
}

func (s *synth) readAbsent(client int, key string, from, to int) {
	s.add(client, "read", key, false, registerInput{Kind: "read"}, registerOutput{Absent: true, Status: 404}, Acked, from, to)
}

func (s *synth) write(client int, key string, v int64, o Outcome, from, to int) {
	s.add(client, "write", key, true, registerInput{Kind: "write", Value: v}, registerOutput{Status: 200}, o, from, to)
}

func (s *synth) cas(client int, key string, f, t int64, o Outcome, status, from, to int) {
	s.add(client, "cas", key, true, registerInput{Kind: "cas", From: f, To: t}, registerOutput{Status: status}, o, from, to)
}

func TestRegisterCheckerAcceptsLinearizableHistoryWithIndeterminateOps(t *testing.T) {
	var s synth
	s.write(0, "a", 1, Acked, 0, 10)
	s.read(1, "a", 1, 11, 12)
	s.write(2, "a", 2, Indeterminate, 13, 20) // may have happened, later
	s.read(1, "a", 1, 21, 22)                 // not yet...
	s.read(0, "a", 2, 23, 24)                 // ...now it has
	s.cas(1, "a", 2, 3, Acked, 200, 25, 30)
	s.cas(0, "a", 2, 4, Failed, 412, 31, 32) // holds 3, not 2
	s.cas(2, "a", 3, 5, Indeterminate, 503, 33, 34)
	s.read(1, "a", 3, 35, 36)          // the indeterminate cas did not happen (yet)
	s.write(0, "a", 9, Failed, 37, 38) // refused connection: no effect
	s.read(1, "a", 3, 39, 40)
	s.write(3, "b", 7, Indeterminate, 0, 1) // never happened
	s.readAbsent(3, "b", 2, 3)
	res := judgeRegisters(Result{}, s.ops, t.TempDir(), 10*time.Second)
	if !res.OK() {
		t.Fatalf("valid history judged %+v", res)
	}
}

func TestRegisterCheckerCatchesStaleRead(t *testing.T) {
	var s synth
	s.write(0, "a", 1, Acked, 0, 10)
	s.write(1, "a", 2, Acked, 11, 20)
	s.read(2, "a", 2, 21, 22)
	s.read(3, "a", 1, 23, 24) // reads the overwritten value after a newer read
	s.readAbsent(3, "b", 23, 24)
	dir := t.TempDir()
	res := judgeRegisters(Result{}, s.ops, dir, 10*time.Second)
	if res.OK() || res.Violations != 1 {
		t.Fatalf("stale read judged %+v", res)
	}
	if !strings.Contains(res.Failures[0], "register a: not linearizable") {
		t.Fatalf("failure names %q", res.Failures[0])
	}
	html, err := os.ReadFile(filepath.Join(dir, "register-a.html"))
	if err != nil || !strings.Contains(string(html), "<html") {
		t.Fatalf("no visualization: %v", err)
	}
	min, err := os.ReadFile(filepath.Join(dir, "register-a-minimal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The minimal history keeps the overwrite and the stale read; the
	// first write and the fresh read are not needed to show it.
	if n := strings.Count(string(min), "\n"); n > 3 {
		t.Fatalf("minimal history has %d operations:\n%s", n, min)
	}
}

func TestRegisterCheckerCatchesLostAcknowledgedWrite(t *testing.T) {
	var s synth
	s.write(0, "a", 1, Acked, 0, 10)
	s.readAbsent(1, "a", 20, 21) // the acknowledged write vanished
	res := judgeRegisters(Result{}, s.ops, "", 10*time.Second)
	if res.Violations != 1 {
		t.Fatalf("lost write judged %+v", res)
	}
	var r synth
	r.write(0, "a", 1, Acked, 0, 10)
	r.write(0, "a", 2, Acked, 11, 20)
	r.read(1, "a", 1, 21, 22) // the later acknowledged write vanished
	if res := judgeRegisters(Result{}, r.ops, "", 10*time.Second); res.Violations != 1 {
		t.Fatalf("lost overwrite judged %+v", res)
	}
}

func TestRegisterCheckerCatchesCASThatSucceededOnWrongValue(t *testing.T) {
	var s synth
	s.write(0, "a", 1, Acked, 0, 10)
	s.cas(1, "a", 5, 6, Acked, 200, 11, 12) // register held 1, not 5
	res := judgeRegisters(Result{}, s.ops, "", 10*time.Second)
	if res.Violations != 1 {
		t.Fatalf("wrong cas judged %+v", res)
	}
	var f synth
	f.write(0, "a", 1, Acked, 0, 10)
	f.cas(1, "a", 1, 6, Failed, 412, 11, 12) // held 1 yet refused
	if res := judgeRegisters(Result{}, f.ops, "", 10*time.Second); res.Violations != 1 {
		t.Fatalf("wrongly refused cas judged %+v", res)
	}
}

func TestLongestWriteGap(t *testing.T) {
	var s synth
	s.write(0, "a", 1, Acked, 0, 100)
	s.write(0, "a", 2, Indeterminate, 100, 900)
	s.read(1, "a", 1, 200, 300)
	s.write(1, "a", 3, Acked, 300, 700)
	if g := longestWriteGap(s.ops, time.Second); g != 600*time.Millisecond {
		t.Fatalf("gap %s, want 600ms (from 100ms to 700ms)", g)
	}
	if g := longestWriteGap(s.ops, 2*time.Second); g != 1300*time.Millisecond {
		t.Fatalf("gap %s, want 1.3s (from 700ms to the end)", g)
	}
}

func TestHistoryRecordsConcurrentOpsAndClosesPending(t *testing.T) {
	h := NewHistory()
	done := make(chan struct{})
	for c := range 8 {
		go func() {
			for i := range 100 {
				op := h.Invoke(c, "write", "k", true, i)
				h.Complete(op, Acked, nil, nil)
			}
			done <- struct{}{}
		}()
	}
	for range 8 {
		<-done
	}
	pending := h.Invoke(9, "write", "k", true, 0)
	_ = pending
	h.Close()
	a, k, i := h.Counts()
	if a != 801 || k != 800 || i != 1 {
		t.Fatalf("counts %d %d %d", a, k, i)
	}
	p := filepath.Join(t.TempDir(), "h.jsonl")
	if err := WriteJSONL(p, h.Ops()); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	if n := strings.Count(string(b), "\n"); n != 801 {
		t.Fatalf("%d lines", n)
	}
	if !strings.Contains(string(b), `"outcome":"info"`) {
		t.Fatal("pending op not dumped as indeterminate")
	}
}

func (s *synth) inc(client int, key string, d int64, o Outcome, from, to int) {
	s.add(client, "inc", key, true, d, nil, o, from, to)
}

func (s *synth) count(client int, key string, v int64, from, to int) {
	s.add(client, "read", key, false, nil, v, Acked, from, to)
}

func TestCounterCheckerBoundsReadsAndFinalValue(t *testing.T) {
	var s synth
	s.inc(0, "c", 2, Acked, 0, 10)
	s.inc(1, "c", 3, Indeterminate, 5, 50)
	s.inc(2, "c", 5, Failed, 6, 7) // refused: never counts
	s.count(3, "c", 2, 11, 12)
	s.count(3, "c", 5, 13, 14) // the indeterminate one landed
	s.inc(0, "c", 1, Acked, 20, 30)
	s.count(3, "c", 6, 100, 101) // final: 2+1 acknowledged, +3 indeterminate
	if res := judgeCounters(Result{}, s.ops, ""); !res.OK() {
		t.Fatalf("valid history judged %+v", res)
	}

	lost := append([]Op(nil), s.ops...)
	lost[len(lost)-1].Output = int64(2) // the acknowledged +1 is gone
	if res := judgeCounters(Result{}, lost, ""); res.Lost != 1 || res.OK() {
		t.Fatalf("lost increment judged %+v", res)
	}

	tooMuch := append([]Op(nil), s.ops...)
	tooMuch[len(tooMuch)-1].Output = int64(11) // the refused +5 counted
	if res := judgeCounters(Result{}, tooMuch, ""); res.Violations != 1 {
		t.Fatalf("refused increment counted judged %+v", res)
	}

	stale := append([]Op(nil), s.ops...)
	stale[3].Output = int64(0) // a read after an acknowledged +2 saw 0
	if res := judgeCounters(Result{}, stale, ""); res.Violations != 1 {
		t.Fatalf("stale read judged %+v", res)
	}
}

func (s *synth) insert(client int, group string, e int64, o Outcome) {
	n := len(s.ops)
	s.add(client, "insert", group, true, e, nil, o, n, n+1)
}

func TestSetCheckerFindsLostAndPhantomElements(t *testing.T) {
	var s synth
	s.insert(0, "g0", 1, Acked)
	s.insert(1, "g0", 2, Indeterminate)
	s.insert(1, "g1", 3, Indeterminate)
	s.insert(2, "g1", 4, Failed)
	s.insert(2, "g1", 5, Acked)
	ok := map[string]map[int64]int64{"g0": {1: 1, 2: 2}, "g1": {5: 5}}
	if res := judgeSet(Result{}, s.ops, ok, ""); !res.OK() {
		t.Fatalf("valid set judged %+v", res)
	}
	lost := map[string]map[int64]int64{"g0": {2: 2}, "g1": {5: 5}}
	if res := judgeSet(Result{}, s.ops, lost, ""); res.Lost != 1 || res.Violations != 0 {
		t.Fatalf("lost element judged %+v", res)
	}
	phantom := map[string]map[int64]int64{"g0": {1: 1, 9: 9}, "g1": {4: 4, 5: 5}}
	if res := judgeSet(Result{}, s.ops, phantom, ""); res.Lost != 0 || res.Violations != 2 {
		t.Fatalf("never-attempted and refused elements judged %+v", res)
	}
	moved := map[string]map[int64]int64{"g0": {1: 1, 5: 5}, "g1": {}}
	if res := judgeSet(Result{}, s.ops, moved, ""); res.Lost != 1 || res.Violations != 1 {
		t.Fatalf("element in the wrong group judged %+v", res)
	}
}

func bankSnap(bals ...int64) snapshot {
	s := snapshot{}
	for i, b := range bals {
		s[account{bankTables[i%2], i / 2}.String()] = balance{Balance: b, Ver: 0}
	}
	return s
}

func TestBankCheckerChecksTotalsAndAppliedTransfers(t *testing.T) {
	var s synth
	s.add(0, "transfer", "bank", true, transferInput{}, nil, Acked, 0, 1)
	s.add(1, "transfer", "bank", true, transferInput{}, nil, Indeterminate, 0, 2)
	s.add(2, "transfer", "bank", true, transferInput{}, nil, Failed, 0, 3)
	s.add(3, "read", "bank", false, nil, bankSnap(100, 90, 110, 100), Acked, 4, 5)
	final := bankSnap(50, 150, 100, 100)
	final["Checking/0"] = balance{Balance: 50, Ver: 1}
	final["Savings/0"] = balance{Balance: 150, Ver: 1}
	if res := judgeBank(Result{}, s.ops, final, 4, 400, ""); !res.OK() {
		t.Fatalf("valid bank judged %+v", res)
	}
	// Both the acknowledged and the indeterminate transfer applied.
	final["Checking/1"] = balance{Balance: 100, Ver: 1}
	final["Savings/1"] = balance{Balance: 100, Ver: 1}
	if res := judgeBank(Result{}, s.ops, final, 4, 400, ""); !res.OK() {
		t.Fatalf("valid bank judged %+v", res)
	}
	// Three applied: one more than attempted and not refused.
	final["Checking/0"] = balance{Balance: 50, Ver: 2}
	final["Savings/0"] = balance{Balance: 150, Ver: 2}
	if res := judgeBank(Result{}, s.ops, final, 4, 400, ""); res.Violations != 1 {
		t.Fatalf("phantom transfer judged %+v", res)
	}
	// None applied: the acknowledged transfer is lost.
	if res := judgeBank(Result{}, s.ops, bankSnap(100, 100, 100, 100), 4, 400, ""); res.Lost != 1 {
		t.Fatalf("lost transfer judged %+v", res)
	}
	// A half-applied transfer: one version moved alone.
	half := bankSnap(100, 100, 100, 100)
	half["Checking/0"] = balance{Balance: 90, Ver: 1}
	if res := judgeBank(Result{}, s.ops, half, 4, 400, ""); res.Violations < 1 {
		t.Fatalf("half transfer judged %+v", res)
	}
	var bad synth
	bad.add(3, "read", "bank", false, nil, bankSnap(100, 90, 100, 100), Acked, 4, 5)  // wrong total
	bad.add(3, "read", "bank", false, nil, bankSnap(-10, 110, 200, 100), Acked, 6, 7) // negative
	bad.add(3, "read", "bank", false, nil, bankSnap(100, 100, 200), Acked, 8, 9)      // an account missing
	bad.add(3, "read", "bank", false, nil, bankSnap(1, 2, 3, 4), Failed, 10, 11)      // not a snapshot: ignored
	dir := t.TempDir()
	res := judgeBank(Result{}, bad.ops, bankSnap(100, 100, 100, 100), 4, 400, dir)
	if res.Violations != 3 {
		t.Fatalf("bad reads judged %+v", res)
	}
	if len(res.Artifacts) != 1 {
		t.Fatalf("no history written: %v", res.Artifacts)
	}
	b, err := os.ReadFile(res.Artifacts[0])
	if err != nil || !strings.Contains(string(b), `"Checking/0":{"balance":100`) {
		t.Fatalf("history: %v\n%s", err, b)
	}
}

func (s *synth) txn(client int, tok int64, group string, o Outcome, scn string, puts ...string) {
	s.add(client, "txn", group, true, txnInput{Token: tok, Group: group, Puts: puts}, scn, o, len(s.ops), len(s.ops)+1)
}

// ev is one stream event of a put of token tok at table/id.
func ev(p int, scn string, tok int64, group, table string, id int, end bool) changeLine {
	return changeLine{Event: changes.Event{SCN: scn, Partition: p, Table: table, Key: []any{group, float64(id)}, Op: "update",
		After: []byte(fmt.Sprintf(`{"tok":%d,"i":0}`, tok)), TxnEnd: end}}
}

func changelogFixture() (synth, []changeLine) {
	var s synth
	s.txn(0, 1, "g0", Acked, "1:1", "A/1", "B/2")
	s.txn(1, 2, "g1", Acked, "1:1", "A/1")
	s.txn(2, 3, "g0", Indeterminate, "", "A/5") // landed, after a leader change
	s.txn(3, 4, "g0", Indeterminate, "", "B/5") // never landed
	s.txn(0, 5, "g0", Acked, "2:3", "B/7")
	s.txn(0, 6, "g0", Failed, "", "B/8") // refused
	evs := []changeLine{
		ev(0, "1:1", 1, "g0", "A", 1, false),
		ev(3, "1:1", 2, "g1", "A", 1, true), // another partition interleaves
		ev(0, "1:1", 1, "g0", "B", 2, true),
		ev(0, "2:2", 3, "g0", "A", 5, true),
		ev(0, "2:3", 5, "g0", "B", 7, true),
	}
	return s, evs
}

func TestChangelogCheckerAcceptsGaplessStreamAcrossGenerations(t *testing.T) {
	s, evs := changelogFixture()
	if res := judgeChangelog(Result{}, s.ops, evs); !res.OK() {
		t.Fatalf("valid stream judged %+v", res)
	}
}

func TestChangelogCheckerFindsGapDuplicatePhantomAndLoss(t *testing.T) {
	s, evs := changelogFixture()
	cases := []struct {
		name        string
		evs         []changeLine
		lost, viols int
	}{
		{"gap", []changeLine{evs[0], evs[1], evs[2], evs[4]}, 0, 1},
		{"duplicate entry", append(append([]changeLine(nil), evs...), evs[4]), 0, 2},                                                 // sequence repeated, transaction repeated
		{"duplicate transaction at a new SCN", append(append([]changeLine(nil), evs...), ev(0, "2:4", 5, "g0", "B", 7, true)), 0, 2}, // and not at its acknowledged SCN
		{"phantom", append(append([]changeLine(nil), evs...), ev(0, "2:4", 99, "g0", "B", 7, true)), 0, 1},
		{"refused transaction present", append(append([]changeLine(nil), evs...), ev(0, "2:4", 6, "g0", "B", 8, true)), 0, 1},
		{"acknowledged transaction lost", []changeLine{evs[0], evs[1], evs[2], evs[3]}, 1, 0},
		{"half a transaction", []changeLine{evs[0], evs[1], ev(0, "1:1", 1, "g0", "B", 3, true), evs[3], evs[4]}, 0, 1},
		{"generation goes back", []changeLine{evs[0], evs[1], evs[2], evs[3], ev(0, "1:3", 5, "g0", "B", 7, true)}, 0, 2}, // and the acknowledged SCN differs
		{"log starts late", []changeLine{evs[1], evs[3], evs[4]}, 1, 1},
	}
	for _, c := range cases {
		res := judgeChangelog(Result{}, s.ops, c.evs)
		if res.Lost != c.lost || res.Violations != c.viols {
			t.Errorf("%s: lost %d violations %d, want %d %d: %v", c.name, res.Lost, res.Violations, c.lost, c.viols, res.Failures)
		}
	}
}

func notApplied(r *Response) *Response {
	r.Header = http.Header{"X-Doppio-Not-Applied": {"true"}}
	return r
}

func TestClassifyOutcomes(t *testing.T) {
	r := func(status int, detail string) *Response {
		return &Response{Status: status, Body: []byte(fmt.Sprintf(`{"status":%d,"detail":%q}`, status, detail))}
	}
	cases := []struct {
		write bool
		resp  *Response
		err   error
		want  Outcome
	}{
		{true, r(200, ""), nil, Acked},
		{true, r(201, ""), nil, Acked},
		{false, r(304, ""), nil, Acked},
		{true, r(412, "If-Match"), nil, Failed},
		{true, r(404, ""), nil, Failed},
		{true, r(409, ""), nil, Failed},
		{true, r(503, "no leader"), nil, Failed}, // 503 always means not applied
		{true, notApplied(r(503, "proposal dropped")), nil, Failed},
		{true, r(504, "outcome unknown"), nil, Indeterminate},
		{true, r(500, ""), nil, Indeterminate},
		{true, nil, context.DeadlineExceeded, Indeterminate},
		{true, nil, &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Failed},
		{true, nil, &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, Indeterminate},
		{false, r(504, "outcome unknown"), nil, Failed},
		{false, nil, context.DeadlineExceeded, Failed},
	}
	for i, c := range cases {
		if got := Classify(c.write, c.resp, c.err); got != c.want {
			t.Errorf("case %d: %v", i, got)
		}
	}
}

// The violation of the fault run that found a leader answering 412 from a
// stale state: the register held 3000000565 before and after, yet a
// compare-and-set from it was refused. The minimal history keeps the
// writes its reads and compare-and-sets observed.
func TestRegisterShrinkKeepsTheWritesOfObservedValues(t *testing.T) {
	var s synth
	s.write(9, "k", 10, Acked, 0, 100)
	s.read(9, "k", 10, 200, 400)
	s.write(6, "k", 7, Acked, 1600, 1700)
	s.read(2, "k", 7, 1400, 1800)
	s.cas(2, "k", 7, 3, Acked, 200, 1900, 2100)
	s.read(2, "k", 3, 2200, 2300)
	s.cas(2, "k", 3, 4, Failed, 412, 2400, 2500)
	s.read(0, "k", 3, 2600, 2700)
	res := judgeRegisters(Result{}, s.ops, "", 10*time.Second)
	if res.Violations != 1 {
		t.Fatalf("refused cas from the held value judged %+v", res)
	}
	v := checkRegisters(s.ops, "", 10*time.Second)[0]
	var kinds []string
	for _, op := range v.Minimal {
		kinds = append(kinds, describeOp(op))
	}
	// write 7, cas 7->3, cas 3->4 refused: the write of 7 stays because the
	// cas observed it.
	if len(v.Minimal) != 3 || v.Minimal[0].Kind != "write" {
		t.Fatalf("minimal history:\n%s", strings.Join(kinds, "\n"))
	}
}
