package bulkload

import (
	"fmt"

	"github.com/doppio-db/doppio/client/wire"
)

// Next is the state a load moves to given its partitions' progress (of
// the load's current run; absent partitions are pending), and the error
// that ends it when it fails. It is a pure function: every node computes
// it alike and the one whose compare-and-swap lands moves the load.
//
//   - verifying → failed when a partition's file was refused, → cancelled
//     when cancelled (nothing is applied while verifying), → loading when
//     every partition is verified or already done;
//   - loading → done when every partition is done, → failed when every
//     partition is done or failed (a new leader refused its copy of the
//     file) and one failed, → cancelled when
//     cancelled and no partition is still loading (those that started
//     finish; the others never start);
//   - an ended load stays as it is.
func Next(r Record, progress map[int]Progress) (state, errMsg string) {
	counts := map[string]int{}
	var failed string
	for _, f := range r.Files {
		p := current(r, progress, f.Partition)
		counts[p.State]++
		if p.State == wire.PartFailed && failed == "" {
			failed = fmt.Sprintf("partition %d: %s", f.Partition, p.Error)
		}
	}
	n := len(r.Files)
	switch r.State {
	case wire.LoadVerifying:
		switch {
		case failed != "":
			return wire.LoadFailed, failed
		case r.Cancelled:
			return wire.LoadCancelled, ""
		case counts[wire.PartVerified]+counts[wire.PartDone] == n:
			return wire.LoadLoading, ""
		}
	case wire.LoadLoading:
		switch {
		case counts[wire.PartDone] == n:
			return wire.LoadDone, ""
		case failed != "" && counts[wire.PartDone]+counts[wire.PartFailed] == n:
			return wire.LoadFailed, failed
		case r.Cancelled && counts[wire.PartLoading] == 0:
			return wire.LoadCancelled, ""
		}
	}
	return r.State, r.Error
}

// stagingLeft reports whether partition progress p (in r's run) may hold
// a staging its leader must delete: r is a replace that ended failed or
// cancelled, the partition did not swap, and its leader has not yet
// deleted its staging or found none. A load started again is not ended,
// so its run keeps the staging and resumes from the partition's mark.
func stagingLeft(r Record, p Progress) bool {
	if r.Mode != ModeReplace || (r.State != wire.LoadFailed && r.State != wire.LoadCancelled) {
		return false
	}
	return p.State != wire.PartDone && p.Staging != wire.StagingDiscarded && p.Staging != stagingNone
}
