package bulkload

import (
	"testing"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulk"
)

func TestNextMovesALoadOnlyWhenEveryPartitionAllowsIt(t *testing.T) {
	rec := func(state string, cancelled bool) Record {
		return Record{State: state, Cancelled: cancelled, Run: 2, Files: []bulk.File{{Partition: 0}, {Partition: 1}, {Partition: 2}}}
	}
	p := func(states ...string) map[int]Progress {
		m := map[int]Progress{}
		for i, s := range states {
			if s != "" {
				m[i] = Progress{Run: 2, State: s, Error: "bad " + s}
			}
		}
		return m
	}
	const (
		pending, verified, loading, done, failed = wire.PartPending, wire.PartVerified, wire.PartLoading, wire.PartDone, wire.PartFailed
	)
	for _, c := range []struct {
		name     string
		rec      Record
		progress map[int]Progress
		want     string
		err      string
	}{
		{"verifying waits for every file", rec(wire.LoadVerifying, false), p(verified, verified, ""), wire.LoadVerifying, ""},
		{"verified or done files load", rec(wire.LoadVerifying, false), p(verified, done, verified), wire.LoadLoading, ""},
		{"one refused file fails the load", rec(wire.LoadVerifying, false), p(verified, failed, pending), wire.LoadFailed, "partition 1: bad failed"},
		{"a cancel while verifying ends it", rec(wire.LoadVerifying, true), p(verified, "", ""), wire.LoadCancelled, ""},
		{"progress of an earlier run is pending", rec(wire.LoadVerifying, false), map[int]Progress{0: {Run: 1, State: done}, 1: {Run: 2, State: verified}, 2: {Run: 2, State: verified}}, wire.LoadVerifying, ""},
		{"loading waits for every partition", rec(wire.LoadLoading, false), p(done, loading, done), wire.LoadLoading, ""},
		{"every partition done", rec(wire.LoadLoading, false), p(done, done, done), wire.LoadDone, ""},
		{"a cancel waits for loading partitions", rec(wire.LoadLoading, true), p(done, loading, verified), wire.LoadLoading, ""},
		{"a cancel ends once none loads", rec(wire.LoadLoading, true), p(done, verified, ""), wire.LoadCancelled, ""},
		{"all done after a cancel is done", rec(wire.LoadLoading, true), p(done, done, done), wire.LoadDone, ""},
		{"a refused copy fails once the rest ended", rec(wire.LoadLoading, false), p(done, failed, done), wire.LoadFailed, "partition 1: bad failed"},
		{"a refused copy waits for the rest", rec(wire.LoadLoading, false), p(done, failed, loading), wire.LoadLoading, ""},
		{"an ended load stays", rec(wire.LoadDone, false), p(pending, pending, pending), wire.LoadDone, ""},
	} {
		got, err := Next(c.rec, c.progress)
		if got != c.want || err != c.err {
			t.Errorf("%s: Next = %s %q, want %s %q", c.name, got, err, c.want, c.err)
		}
	}
}

func TestStagingLeftOnlyInAnEndedReplaceThatDidNotSwap(t *testing.T) {
	for _, c := range []struct {
		name string
		rec  Record
		p    Progress
		want bool
	}{
		{"a failed replace's loading partition", Record{Mode: ModeReplace, State: wire.LoadFailed}, Progress{State: wire.PartFailed}, true},
		{"a cancelled replace's skipped partition is checked", Record{Mode: ModeReplace, State: wire.LoadCancelled}, Progress{State: wire.PartPending}, true},
		{"one being discarded", Record{Mode: ModeReplace, State: wire.LoadFailed}, Progress{State: wire.PartFailed, Staging: wire.StagingDiscarding}, true},
		{"one discarded", Record{Mode: ModeReplace, State: wire.LoadFailed}, Progress{State: wire.PartFailed, Staging: wire.StagingDiscarded}, false},
		{"one found with nothing staged", Record{Mode: ModeReplace, State: wire.LoadCancelled}, Progress{State: wire.PartPending, Staging: stagingNone}, false},
		{"a swapped partition", Record{Mode: ModeReplace, State: wire.LoadFailed}, Progress{State: wire.PartDone}, false},
		{"a replace running again", Record{Mode: ModeReplace, State: wire.LoadVerifying}, Progress{State: wire.PartPending}, false},
		{"a replace loading", Record{Mode: ModeReplace, State: wire.LoadLoading, Cancelled: true}, Progress{State: wire.PartLoading}, false},
		{"a done replace", Record{Mode: ModeReplace, State: wire.LoadDone}, Progress{State: wire.PartDone}, false},
		{"a failed merge stages nothing", Record{Mode: ModeMerge, State: wire.LoadFailed}, Progress{State: wire.PartFailed}, false},
	} {
		if got := stagingLeft(c.rec, c.p); got != c.want {
			t.Errorf("%s: stagingLeft = %v, want %v", c.name, got, c.want)
		}
	}
}
