package derived

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

// store builds a record from "1:current 2:fetching/L2/noswap …": each
// version's number, state, load ID and whether it swaps by itself.
func store(spec string) Store {
	s := Store{Database: "D", Table: "T", Retain: DefaultRetain}
	for _, f := range strings.Fields(spec) {
		num, rest, _ := strings.Cut(f, ":")
		parts := strings.Split(rest, "/")
		n, _ := strconv.Atoi(num)
		v := Version{Version: n, State: parts[0], Swap: true, Created: t0}
		if len(parts) > 1 {
			v.Load = parts[1]
		}
		if len(parts) > 2 && parts[2] == "noswap" {
			v.Swap = false
		}
		s.Versions = append(s.Versions, v)
		s.Last = max(s.Last, n)
	}
	return s
}

// spec renders a record as store reads it (without load IDs).
func spec(s Store) string {
	var out []string
	for _, v := range s.Versions {
		out = append(out, strconv.Itoa(v.Version)+":"+v.State)
	}
	return strings.Join(out, " ")
}

// twoPartitions is a placement of 2 partitions on nodes a, b and b, c.
var twoPartitions = [][]string{{"a", "b"}, {"b", "c"}}

func held(v int, byNode map[string][]int) map[string]Report {
	out := map[string]Report{}
	for n, ps := range byNode {
		out[n] = Report{Held: map[int][]int{v: ps}, Gone: map[int][]int{v: ps}}
	}
	return out
}

func TestNext(t *testing.T) {
	all := map[string][]int{"a": {0}, "b": {0, 1}, "c": {1}}
	for _, tc := range []struct {
		name    string
		s       Store
		in      Inputs
		want    string
		wantErr string
	}{
		{name: "a fetching version stays until its load is done",
			s: store("1:current 2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadLoading}}, Placement: twoPartitions, Reports: held(2, all)},
			want: "1:current 2:fetching"},
		{name: "a done load waits for every placed replica to hold it",
			s: store("1:current 2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadDone}}, Placement: twoPartitions,
				Reports: held(2, map[string][]int{"a": {0}, "b": {0, 1}, "c": {}})},
			want: "1:current 2:fetching"},
		{name: "held everywhere, it is swapped in and the old one is a backup",
			s: store("1:current 2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadDone}}, Placement: twoPartitions, Reports: held(2, all)},
			want: "1:backup 2:current"},
		{name: "without a placement nothing is held",
			s: store("2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadDone}}, Reports: held(2, all)},
			want: "2:fetching"},
		{name: "pushed with no-swap, it stays staged",
			s: store("1:current 2:fetching/L/noswap"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadDone}}, Placement: twoPartitions, Reports: held(2, all)},
			want: "1:current 2:staged"},
		{name: "a swap past retention sends the oldest backup to deletion",
			s: store("1:backup 2:current 3:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadDone}}, Placement: twoPartitions, Reports: held(3, all)},
			want: "1:deleting 2:backup 3:current"},
		{name: "a failed load fails the version",
			s: store("1:current 2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadFailed, Error: "partition 1: bad sha256"}}, Placement: twoPartitions},
			want: "1:current 2:failed", wantErr: "load failed: partition 1: bad sha256"},
		{name: "a cancelled load fails the version",
			s: store("1:current 2:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadCancelled}}, Placement: twoPartitions},
			want: "1:current 2:failed", wantErr: "load cancelled"},
		{name: "a push that never recorded its load fails after the timeout",
			s: store("1:current 2:fetching"), in: Inputs{Placement: twoPartitions, Now: t0.Add(pushTimeout + time.Second)},
			want: "1:current 2:failed", wantErr: "the push ended before its load was recorded"},
		{name: "a push recording its load is left alone",
			s: store("1:current 2:fetching"), in: Inputs{Placement: twoPartitions, Now: t0.Add(time.Second)},
			want: "1:current 2:fetching"},
		{name: "a deleted version goes once every replica is empty of it",
			s: store("1:deleting 2:backup 3:current"), in: Inputs{Placement: twoPartitions, Reports: held(1, all)},
			want: "2:backup 3:current"},
		{name: "a deleted version stays while a replica holds some of it",
			s: store("1:deleting 2:backup 3:current"), in: Inputs{Placement: twoPartitions, Reports: held(1, map[string][]int{"a": {0}, "b": {0}, "c": {1}})},
			want: "1:deleting 2:backup 3:current"},
		{name: "the last failed version stays listed once empty",
			s: store("1:current 2:failed"), in: Inputs{Placement: twoPartitions, Reports: held(2, all)},
			want: "1:current 2:failed"},
		{name: "a failed version goes once empty and a newer one exists",
			s: store("1:current 2:failed 3:fetching/L"), in: Inputs{Loads: map[string]LoadState{"L": {State: wire.LoadLoading}}, Placement: twoPartitions, Reports: held(2, all)},
			want: "1:current 3:fetching"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := spec(tc.s)
			got, moved := Next(tc.s, tc.in)
			if spec(got) != tc.want {
				t.Fatalf("Next(%s) = %s, want %s", before, spec(got), tc.want)
			}
			if moved != (tc.want != before) {
				t.Fatalf("Next(%s) moved = %v", before, moved)
			}
			if spec(tc.s) != before {
				t.Fatalf("Next changed its input to %s", spec(tc.s))
			}
			if tc.wantErr != "" {
				if e := got.Versions[got.index(2)].Error; e != tc.wantErr {
					t.Fatalf("error %q, want %q", e, tc.wantErr)
				}
			}
		})
	}
}

func TestMoves(t *testing.T) {
	for _, tc := range []struct {
		name, from string
		move       func(Store) (Store, error)
		want       string
		conflict   string // a substring of the Conflict's detail
	}{
		{name: "swap", from: "1:current 2:staged", move: Swap, want: "1:backup 2:current"},
		{name: "swap keeps retention", from: "1:backup 2:current 3:staged", move: Swap, want: "1:deleting 2:backup 3:current"},
		{name: "swap without a staged version", from: "1:current", move: Swap, conflict: "has no staged version"},
		{name: "swap while fetching", from: "1:current 2:fetching", move: Swap, conflict: "version 2 of D.T is still fetching"},
		{name: "rollback", from: "1:backup 2:current", move: Rollback, want: "1:current 2:backup"},
		{name: "rollback picks the newest older backup", from: "1:backup 2:backup 3:current", move: Rollback, want: "1:backup 2:current 3:backup"},
		{name: "rollback twice", from: "1:backup 2:current 3:backup", move: Rollback, want: "1:current 2:backup 3:backup"},
		{name: "rollback without a backup", from: "1:current", move: Rollback, conflict: "no backup older than its current version 1"},
		{name: "rollback leaves a staged version", from: "1:backup 2:current 3:staged", move: Rollback, want: "1:current 2:backup 3:staged"},
		{name: "roll forward", from: "1:current 2:backup", move: RollForward, want: "1:backup 2:current"},
		{name: "roll forward picks the oldest newer backup", from: "1:current 2:backup 3:backup", move: RollForward, want: "1:backup 2:current 3:backup"},
		{name: "roll forward without a rollback", from: "1:backup 2:current", move: RollForward, conflict: "no backup newer than its current version 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.move(store(tc.from))
			if tc.conflict != "" {
				if !problem.Is(err, problem.Conflict) || !strings.Contains(err.Error(), tc.conflict) {
					t.Fatalf("err = %v, want a Conflict saying %q", err, tc.conflict)
				}
				return
			}
			if err != nil || spec(got) != tc.want {
				t.Fatalf("= %s, %v; want %s", spec(got), err, tc.want)
			}
		})
	}
}

func TestPush(t *testing.T) {
	s, v, err := Push(Store{Database: "D", Table: "T"}, wire.DerivedPush{Source: "/b1"}, t0)
	if err != nil || v.Version != 1 || v.State != wire.VersionFetching || !v.Swap || s.Retain != DefaultRetain || s.Last != 1 {
		t.Fatalf("first push: %+v %+v %v", s, v, err)
	}
	if _, _, err := Push(s, wire.DerivedPush{Source: "/b2"}, t0); !problem.Is(err, problem.Conflict) ||
		!strings.Contains(err.Error(), "version 1 of D.T is fetching (pushed from /b1") {
		t.Fatalf("second push while fetching: %v", err)
	}
	s.Versions[0].State = wire.VersionStaged
	if _, _, err := Push(s, wire.DerivedPush{Source: "/b2"}, t0); !problem.Is(err, problem.Conflict) || !strings.Contains(err.Error(), "is staged") {
		t.Fatalf("push while staged: %v", err)
	}
	s.Versions[0].State = wire.VersionCurrent
	s2, v, err := Push(s, wire.DerivedPush{Source: "/b2", NoSwap: true, Retain: 3}, t0)
	if err != nil || v.Version != 2 || v.Swap || s2.Retain != 3 || len(s.Versions) != 1 {
		t.Fatalf("push after a swap: %+v %+v %v (input %+v)", s2, v, err, s)
	}
	// Numbers are never reused: a withdrawn push gives back only the last.
	if w := withdraw(s2, 2); w.Last != 1 || len(w.Versions) != 1 {
		t.Fatalf("withdraw: %+v", w)
	}
	if _, _, err := Push(s, wire.DerivedPush{Source: "/b", Retain: -1}, t0); !problem.Is(err, problem.Malformed) {
		t.Fatalf("negative retain: %v", err)
	}
}

func TestDiscard(t *testing.T) {
	for _, tc := range []struct {
		name, from string
		version    int
		want       string
		kind       problem.Kind
		detail     string // a substring of the refusal's detail
	}{
		{name: "the staged version", from: "1:current 2:staged", want: "1:current 2:deleting"},
		{name: "the staged version by number", from: "1:backup 2:current 3:staged", version: 3, want: "1:backup 2:current 3:deleting"},
		{name: "the first version, staged", from: "1:staged", want: "1:deleting"},
		{name: "nothing staged", from: "1:backup 2:current", kind: problem.Conflict, detail: "D.T has no staged version to discard"},
		{name: "a fetching version is not staged yet", from: "1:current 2:fetching/L9", kind: problem.Conflict, detail: "D.T has no staged version to discard"},
		{name: "a fetching version by number", from: "1:current 2:fetching/L9", version: 2, kind: problem.Conflict, detail: "version 2 of D.T is still fetching: cancel its load (doppio bulk cancel L9)"},
		{name: "the current version", from: "1:current 2:staged", version: 1, kind: problem.Conflict, detail: "version 1 of D.T is current: only a staged version is discarded"},
		{name: "a backup", from: "1:backup 2:current", version: 1, kind: problem.Conflict, detail: "version 1 of D.T is backup"},
		{name: "a version that never was", from: "1:current 2:staged", version: 7, kind: problem.NotFound, detail: "D.T has no version 7"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := store(tc.from)
			before := spec(from)
			got, err := Discard(from, tc.version)
			if spec(from) != before {
				t.Fatalf("Discard changed its input to %s", spec(from))
			}
			if tc.detail != "" {
				if !problem.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.detail) {
					t.Fatalf("err = %v, want a %v saying %q", err, tc.kind, tc.detail)
				}
				if spec(got) != spec(from) {
					t.Fatalf("a refused discard changed the record to %s", spec(got))
				}
				return
			}
			if err != nil || spec(got) != tc.want {
				t.Fatalf("= %s, %v; want %s", spec(got), err, tc.want)
			}
			// The discarded version goes once every replica is empty of it.
			v := got.Versions[len(got.Versions)-1].Version
			next, _ := Next(got, Inputs{Placement: twoPartitions, Reports: held(v, map[string][]int{"a": {0}, "b": {0, 1}, "c": {1}})})
			if want := strings.TrimSpace(strings.TrimSuffix(tc.want, strconv.Itoa(v)+":deleting")); spec(next) != want {
				t.Fatalf("once empty everywhere: %s, want %s", spec(next), want)
			}
		})
	}
}

// After a rollback from 2 to 1, swapping 3 in keeps 1, the version that
// was current (and under reads) a moment ago, as the backup and deletes
// 2: retention goes by when a backup was last current, not by number.
func TestRetentionKeepsTheVersionLastCurrent(t *testing.T) {
	s := store("1:current 2:staged")
	s, err := Swap(s)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = Rollback(s); err != nil || spec(s) != "1:current 2:backup" {
		t.Fatalf("rollback: %s, %v", spec(s), err)
	}
	s.Versions = append(s.Versions, Version{Version: 3, State: wire.VersionStaged, Swap: true, Created: t0})
	s.Last = 3
	if s, err = Swap(s); err != nil || spec(s) != "1:backup 2:deleting 3:current" {
		t.Fatalf("swap after a rollback: %s, %v; want 1:backup 2:deleting 3:current", spec(s), err)
	}
	if s, err = Rollback(s); err != nil || s.Current() != 1 {
		t.Fatalf("rollback after the swap: current %d, %v; want 1", s.Current(), err)
	}

	// With three kept, the two most recently current backups stay.
	s = store("1:current 2:staged")
	s.Retain = 3
	s, _ = Swap(s) // 2 current, 1 backup
	s.Versions = append(s.Versions, Version{Version: 3, State: wire.VersionStaged, Swap: true, Created: t0})
	s, _ = Swap(s) // 3 current, backups 2 (just demoted) and 1
	s, _ = Rollback(s)
	if spec(s) != "1:backup 2:current 3:backup" {
		t.Fatalf("rollback with three kept: %s", spec(s))
	}
	s.Versions = append(s.Versions, Version{Version: 4, State: wire.VersionStaged, Swap: true, Created: t0})
	if s, _ = Swap(s); spec(s) != "1:deleting 2:backup 3:backup 4:current" {
		t.Fatalf("swap with three kept: %s; want 1:deleting 2:backup 3:backup 4:current", spec(s))
	}
}
