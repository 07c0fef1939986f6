package loadgen

import (
	"math"
	"testing"
	"time"
)

func TestSummarizeKeepsItsWindowAndKind(t *testing.T) {
	ms := time.Millisecond
	var ops []Op
	for i := range 100 { // reads at 0..99 ms taking 1..100 ms
		ops = append(ops, Op{Kind: "read", At: time.Duration(i) * ms, Took: time.Duration(i+1) * ms})
	}
	ops = append(ops,
		Op{Kind: "write", At: 10 * ms, Took: time.Second},
		Op{Kind: "read", At: 20 * ms, Failed: true},
		Op{Kind: "read", At: 100 * ms, Took: time.Second}, // past the window
	)
	s := Summarize(ops, "read", 0, 100*ms)
	if s.Ops != 101 || s.Failed != 1 || math.Abs(s.Throughput-1000) > 1e-6 || s.P50 != 51*ms || s.P99 != 100*ms {
		t.Fatalf("Summarize = %+v, want 101 ops, 1 failed, 1000/s, p50 51ms, p99 100ms", s)
	}
	if all := Summarize(ops, "", 0, 100*ms); all.Ops != 102 || all.Failed != 1 {
		t.Fatalf("every kind: %+v, want 102 ops, 1 failed", all)
	}
}

func TestAtP99PicksTheFastestLevelWithinTheBound(t *testing.T) {
	curve := []Level{
		{Workers: 1, Summary: Summary{Throughput: 100, P99: 2 * time.Millisecond}},
		{Workers: 4, Summary: Summary{Throughput: 300, P99: 5 * time.Millisecond}},
		{Workers: 16, Summary: Summary{Throughput: 500, P99: 9 * time.Millisecond, Failed: 1}},
		{Workers: 64, Summary: Summary{Throughput: 600, P99: 40 * time.Millisecond}},
	}
	if l, ok := AtP99(curve, 10*time.Millisecond); !ok || l.Workers != 4 {
		t.Fatalf("AtP99(10ms) = %+v, %v; want the 4-worker level (16 had a failure)", l, ok)
	}
	if l, ok := AtP99(curve, time.Millisecond); ok {
		t.Fatalf("AtP99(1ms) = %+v, want none", l)
	}
}
