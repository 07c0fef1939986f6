package torture

import (
	"strings"
	"testing"
	"time"
)

// cacheSynth builds a synthetic cache history on one key, times in
// milliseconds.
type cacheSynth struct{ ops []Op }

func (s *cacheSynth) add(kind string, in cacheInput, out cacheOutput, o Outcome, from, to int) {
	s.ops = append(s.ops, Op{Index: len(s.ops), Kind: kind, Key: "0", Write: kind != "read", Input: in, Output: out, Outcome: o,
		Invoke: time.Duration(from) * time.Millisecond, Complete: time.Duration(to) * time.Millisecond})
}

func (s *cacheSynth) write(v int64, o Outcome, from, to int) {
	s.add("write", cacheInput{Kind: "write", Value: v}, cacheOutput{}, o, from, to)
}

func (s *cacheSynth) delete(o Outcome, from, to int) {
	s.add("delete", cacheInput{Kind: "delete"}, cacheOutput{}, o, from, to)
}

// read records an answered read of v (0: absent) with a bound in
// milliseconds.
func (s *cacheSynth) read(v int64, bound, from, to int) {
	s.add("read", cacheInput{Kind: "read", Bound: time.Duration(bound) * time.Millisecond},
		cacheOutput{Status: 200, Value: v, Absent: v == 0, Source: "redis"}, Acked, from, to)
}

func TestCacheCheckerAcceptsReadsWithinTheirBounds(t *testing.T) {
	var s cacheSynth
	s.read(0, 100, 0, 1) // absent from the start
	s.write(1, Acked, 0, 10)
	s.read(0, 100, 12, 13) // 1 was acknowledged within the bound
	s.read(1, 5, 20, 21)
	s.write(2, Indeterminate, 30, 40) // may take effect at any time
	s.read(2, 1, 50, 51)
	s.read(1, 1, 60, 61) // bounded staleness promises no monotonic reads
	s.delete(Acked, 70, 80)
	s.read(2, 30, 100, 101) // the delete was acknowledged 21 ms before the read
	s.read(0, 1, 110, 111)
	s.delete(Indeterminate, 120, 130)
	s.write(3, Acked, 140, 150)
	// The indeterminate delete may come last.
	s.read(0, 1, 200, 201)
	// The nodes could not answer: no violation.
	s.add("read", cacheInput{Kind: "read", Bound: time.Second}, cacheOutput{Status: 503}, Failed, 210, 220)
	// Refused: never took effect.
	s.write(4, Failed, 230, 240)
	s.read(3, 10, 300, 301)
	if got := checkCacheReads(s.ops); len(got) != 0 {
		t.Fatalf("a valid history judged:\n%s", strings.Join(got, "\n"))
	}
}

func TestCacheCheckerCatchesEveryViolation(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(s *cacheSynth)
		want string
	}{
		{"value older than the bound", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.write(2, Acked, 20, 30)
			s.read(1, 50, 100, 101)
		}, "stale read (redis source): value 1, older than its staleness bound 50ms"},
		{"absence older than the bound", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.read(0, 50, 100, 101)
		}, "stale read (redis source): absent, older than its staleness bound 50ms"},
		{"deleted document back", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.delete(Acked, 20, 30)
			s.read(1, 50, 100, 101)
		}, "deleted document came back (redis source): value 1"},
		{"deleted then written again, old value back", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.delete(Acked, 20, 30)
			s.write(2, Acked, 40, 50)
			s.read(1, 10, 100, 101)
		}, "deleted document came back"},
		{"value never written", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.read(7, 1000, 100, 101)
		}, "phantom read (redis source): value 7"},
		{"value written only after the read", func(s *cacheSynth) {
			s.read(1, 1000, 0, 1)
			s.write(1, Acked, 10, 20)
		}, "phantom read"},
		{"as-of later than the state shown", func(s *cacheSynth) {
			s.write(1, Acked, 0, 10)
			s.write(2, Acked, 20, 30)
			s.add("read", cacheInput{Kind: "read", Bound: time.Minute},
				cacheOutput{Status: 200, Value: 1, Source: "local", AsOf: 50 * time.Millisecond, HasAsOf: true}, Acked, 100, 101)
		}, "stale read (local source): value 1, older than its X-Doppio-As-Of (0.050s)"},
		{"a read the nodes could answer failed", func(s *cacheSynth) {
			s.add("read", cacheInput{Kind: "read", Bound: time.Second}, cacheOutput{Status: 500, Refused: true}, Failed, 0, 1)
		}, "a read the nodes could answer failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s cacheSynth
			tc.ops(&s)
			got := checkCacheReads(s.ops)
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("got %d violations:\n%s\nwant one containing %q", len(got), strings.Join(got, "\n"), tc.want)
			}
		})
	}
}
