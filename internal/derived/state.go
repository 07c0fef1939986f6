package derived

import (
	"slices"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
)

// DefaultRetain is how many versions a table keeps unless a push says
// otherwise: the current one and one backup to roll back to.
const DefaultRetain = 2

// pushTimeout is how long a version may stay fetching without a bulk load
// recorded for it before it is failed: its push was interrupted between
// claiming the version number and starting the load.
const pushTimeout = time.Minute

// Store is a derived table's record in etcd: its versions and their
// states. Every change is a compare-and-swap on its ModRevision.
type Store struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	// Retain is how many versions are kept: current and backups.
	Retain int `json:"retain"`
	// Last is the highest version number handed out; numbers are never
	// reused, so a version's stored table is never a former one's.
	Last     int       `json:"last"`
	Versions []Version `json:"versions"` // in version order
	// Moves counts the changes of current version; a backup's Demoted
	// is the count when it stopped being current.
	Moves int `json:"moves,omitempty"`
}

// Version is one version of a derived table.
type Version struct {
	Version  int       `json:"version"`
	State    string    `json:"state"`
	Source   string    `json:"source"`
	Throttle int64     `json:"throttle,omitempty"`
	Load     string    `json:"load,omitempty"` // the bulk load fetching it
	Swap     bool      `json:"swap"`           // becomes current once staged
	Error    string    `json:"error,omitempty"`
	Created  time.Time `json:"created"`
	// Demoted orders backups by when they were last current (see
	// retain): the higher, the more recently.
	Demoted int `json:"demoted,omitempty"`
}

// LoadState is what the state machine needs of a version's bulk load.
type LoadState struct {
	State string // a wire.Load* state; "" when the load is not found
	Error string
}

// Report is what one node reports about its replicas of a derived
// table's partitions.
type Report struct {
	// Seen is the ModRevision of the table's record the node serves.
	Seen int64 `json:"seen"`
	// Held lists, per fetching version, the partitions whose replica on
	// this node has applied the version's whole file.
	Held map[int][]int `json:"held,omitempty"`
	// Gone lists, per version being deleted, the partitions whose replica
	// on this node holds none of it.
	Gone map[int][]int `json:"gone,omitempty"`
}

// Inputs are what Next decides on besides the record.
type Inputs struct {
	Loads map[string]LoadState // by load ID
	// Placement lists each partition's replicas (node IDs).
	Placement [][]string
	Reports   map[string]Report // by node ID
	Now       time.Time
}

// Current is the current version's number, 0 when there is none.
func (s Store) Current() int {
	for _, v := range s.Versions {
		if v.State == wire.VersionCurrent {
			return v.Version
		}
	}
	return 0
}

// Readable reports whether reads may name version v: staged, current or
// backup, whose data is whole on every replica.
func (s Store) Readable(v int) bool {
	st := s.state(v)
	return st == wire.VersionStaged || st == wire.VersionCurrent || st == wire.VersionBackup
}

// Stored reports whether version v's table must be known to the
// partitions: it is being written or may be read.
func (s Store) Stored(v int) bool {
	return s.state(v) == wire.VersionFetching || s.Readable(v)
}

// Dropping reports whether version v's data is to be deleted.
func (s Store) Dropping(v int) bool {
	st := s.state(v)
	return st == wire.VersionDeleting || st == wire.VersionFailed
}

func (s Store) state(v int) string {
	if i := s.index(v); i >= 0 {
		return s.Versions[i].State
	}
	return ""
}

func (s Store) index(v int) int {
	return slices.IndexFunc(s.Versions, func(x Version) bool { return x.Version == v })
}

// clone copies s so that a change leaves the original as it was.
func (s Store) clone() Store {
	s.Versions = slices.Clone(s.Versions)
	return s
}

// inFlight is the version being fetched or staged, if any: at most one.
func (s Store) inFlight() (Version, bool) {
	for _, v := range s.Versions {
		if v.State == wire.VersionFetching || v.State == wire.VersionStaged {
			return v, true
		}
	}
	return Version{}, false
}

// Push returns s with the next version fetching from req's source. A
// version already fetching or staged is a Conflict naming it: one push at
// a time per table.
func Push(s Store, req wire.DerivedPush, now time.Time) (Store, Version, error) {
	if req.Retain < 0 {
		return s, Version{}, problem.Field(problem.Malformed, "retain", "retain %d is negative", req.Retain)
	}
	if req.Throttle < 0 {
		return s, Version{}, problem.Field(problem.Malformed, "throttle", "throttle %d is negative", req.Throttle)
	}
	if v, ok := s.inFlight(); ok {
		return s, Version{}, problem.New(problem.Conflict, "version %d of %s.%s is %s (pushed from %s at %s): swap it or let it end before pushing another",
			v.Version, s.Database, s.Table, v.State, v.Source, v.Created.Format(time.RFC3339))
	}
	s = s.clone()
	if req.Retain > 0 {
		s.Retain = req.Retain
	}
	if s.Retain == 0 {
		s.Retain = DefaultRetain
	}
	s.Last++
	v := Version{Version: s.Last, State: wire.VersionFetching, Source: req.Source, Throttle: req.Throttle, Swap: !req.NoSwap, Created: now.UTC()}
	s.Versions = append(s.Versions, v)
	return s, v, nil
}

// Swap makes the staged version current; the current one becomes a
// backup, and versions past retention are deleted.
func Swap(s Store) (Store, error) {
	for _, v := range s.Versions {
		if v.State == wire.VersionStaged {
			return retain(makeCurrent(s, v.Version)), nil
		}
	}
	if v, ok := s.inFlight(); ok {
		return s, problem.New(problem.Conflict, "version %d of %s.%s is still %s: it can be swapped in once every replica holds it", v.Version, s.Database, s.Table, v.State)
	}
	return s, problem.New(problem.Conflict, "%s.%s has no staged version to swap in", s.Database, s.Table)
}

// Rollback makes the newest backup older than the current version
// current; the current one stays, as a backup, for RollForward.
func Rollback(s Store) (Store, error) {
	cur, best := s.Current(), 0
	for _, v := range s.Versions {
		if v.State == wire.VersionBackup && v.Version < cur {
			best = max(best, v.Version)
		}
	}
	if best == 0 {
		return s, problem.New(problem.Conflict, "%s.%s has no backup older than its current version %d to roll back to", s.Database, s.Table, cur)
	}
	return makeCurrent(s, best), nil
}

// RollForward undoes a rollback: the oldest backup newer than the current
// version becomes current.
func RollForward(s Store) (Store, error) {
	cur, best := s.Current(), 0
	for _, v := range s.Versions {
		if v.State == wire.VersionBackup && v.Version > cur && (best == 0 || v.Version < best) {
			best = v.Version
		}
	}
	if best == 0 {
		return s, problem.New(problem.Conflict, "%s.%s has no backup newer than its current version %d to roll forward to", s.Database, s.Table, cur)
	}
	return makeCurrent(s, best), nil
}

// Discard sends a staged version the user does not want to deletion:
// version v, or the staged one when v is 0. Only a staged version is
// discarded: a fetching one is still being written (cancel its load),
// and current and backup ones are what rollbacks return to.
func Discard(s Store, v int) (Store, error) {
	if v == 0 {
		staged, ok := s.inFlight()
		if !ok || staged.State != wire.VersionStaged {
			return s, problem.New(problem.Conflict, "%s.%s has no staged version to discard", s.Database, s.Table)
		}
		v = staged.Version
	}
	i := s.index(v)
	if i < 0 {
		return s, problem.Field(problem.NotFound, "version", "%s.%s has no version %d", s.Database, s.Table, v)
	}
	switch x := s.Versions[i]; x.State {
	case wire.VersionStaged:
	case wire.VersionFetching:
		return s, problem.Field(problem.Conflict, "version", "version %d of %s.%s is still fetching: cancel its load (doppio bulk cancel %s) rather than discard it", v, s.Database, s.Table, x.Load)
	default:
		return s, problem.Field(problem.Conflict, "version", "version %d of %s.%s is %s: only a staged version is discarded", v, s.Database, s.Table, x.State)
	}
	s = s.clone()
	s.Versions[i].State = wire.VersionDeleting
	return s, nil
}

// makeCurrent returns s with version v current and the current one a
// backup.
func makeCurrent(s Store, v int) Store {
	s = s.clone()
	s.Moves++
	for i := range s.Versions {
		switch {
		case s.Versions[i].Version == v:
			s.Versions[i].State = wire.VersionCurrent
		case s.Versions[i].State == wire.VersionCurrent:
			s.Versions[i].State = wire.VersionBackup
			s.Versions[i].Demoted = s.Moves
		}
	}
	return s
}

// retain sends the backups past retention to deletion: the current
// version and the Retain-1 backups most recently current stay. After a
// rollback from N to N-1 and a push of N+1, that keeps N-1, the version
// readers were reading a moment ago, and deletes N: by number it would
// be the other way round, deleting what was current under reads in
// flight.
func retain(s Store) Store {
	var backups []int
	for i, v := range s.Versions {
		if v.State == wire.VersionBackup {
			backups = append(backups, i)
		}
	}
	slices.SortFunc(backups, func(a, b int) int {
		x, y := s.Versions[a], s.Versions[b]
		if x.Demoted != y.Demoted {
			return y.Demoted - x.Demoted
		}
		return y.Version - x.Version
	})
	for _, i := range backups[min(max(s.Retain, 1)-1, len(backups)):] {
		s.Versions[i].State = wire.VersionDeleting
	}
	return s
}

// Next is the record s moves to given its versions' loads, the placement
// and the nodes' reports, and whether it moved. It is a pure function:
// every node computes it alike and the one whose compare-and-swap lands
// moves the table.
//
//   - fetching → failed when its load failed or was cancelled, or when no
//     load was recorded within pushTimeout; → staged when its load is
//     done and every placed replica of every partition reports it held;
//   - staged → current when pushed to swap (the current one becomes a
//     backup; backups past retention go to deleting);
//   - deleting → gone, and failed → gone once a newer version exists,
//     when every placed replica of every partition reports it empty.
func Next(s Store, in Inputs) (Store, bool) {
	next := s.clone()
	for i := range next.Versions {
		v := &next.Versions[i]
		if v.State != wire.VersionFetching {
			continue
		}
		ls := in.Loads[v.Load]
		switch {
		case v.Load == "" && in.Now.Sub(v.Created) > pushTimeout:
			v.State, v.Error = wire.VersionFailed, "the push ended before its load was recorded"
		case ls.State == wire.LoadFailed || ls.State == wire.LoadCancelled:
			v.State, v.Error = wire.VersionFailed, "load "+ls.State
			if ls.Error != "" {
				v.Error += ": " + ls.Error
			}
		case ls.State == wire.LoadDone && everywhere(in, v.Version, func(r Report) map[int][]int { return r.Held }):
			v.State = wire.VersionStaged
		}
	}
	for _, v := range next.Versions {
		if v.State == wire.VersionStaged && v.Swap {
			next = retain(makeCurrent(next, v.Version))
		}
	}
	next.Versions = slices.DeleteFunc(next.Versions, func(v Version) bool {
		gone := func() bool { return everywhere(in, v.Version, func(r Report) map[int][]int { return r.Gone }) }
		switch v.State {
		case wire.VersionDeleting:
			return gone()
		case wire.VersionFailed:
			return v.Version < next.Last && gone()
		}
		return false
	})
	return next, !equal(s, next)
}

// everywhere reports whether every placed replica of every partition is
// listed for version v in its node's report (of the kind of).
func everywhere(in Inputs, v int, of func(Report) map[int][]int) bool {
	if len(in.Placement) == 0 {
		return false
	}
	for p, nodes := range in.Placement {
		if len(nodes) == 0 {
			return false
		}
		for _, n := range nodes {
			r, ok := in.Reports[n]
			if !ok || !slices.Contains(of(r)[v], p) {
				return false
			}
		}
	}
	return true
}

func equal(a, b Store) bool {
	return a.Database == b.Database && a.Table == b.Table && a.Retain == b.Retain && a.Last == b.Last && slices.Equal(a.Versions, b.Versions)
}
