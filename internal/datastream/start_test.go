package datastream

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
)

// fakeLog is a change log in memory, keyed like the real one by
// (generation, sequence); it counts reads.
type fakeLog struct {
	mu    sync.Mutex
	ents  []partition.LogEntry
	reads int
}

// add appends empty entries (transactions with no writes) up to seq, in
// generation 1.
func (l *fakeLog) add(seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for s := uint64(len(l.ents)) + 1; s <= seq; s++ {
		l.ents = append(l.ents, partition.LogEntry{SCN: partition.SCN{Generation: 1, Sequence: s}, WriteSet: &partition.WriteSet{Mtime: int64(s)}})
	}
}

func (l *fakeLog) ReadLog(from partition.SCN, limit int) ([]partition.LogEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	i := sort.Search(len(l.ents), func(i int) bool {
		s := l.ents[i].SCN
		return s.Generation > from.Generation || (s.Generation == from.Generation && s.Sequence > from.Sequence)
	})
	return l.ents[i:min(len(l.ents), i+limit)], nil
}

func (l *fakeLog) Commits() <-chan struct{} { return make(chan struct{}) }

func (l *fakeLog) Applied() partition.SCN {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.ents) == 0 {
		return partition.SCN{}
	}
	return l.ents[len(l.ents)-1].SCN
}

var _ changes.Log = (*fakeLog)(nil)

// newFakeLog holds sequences first..last, the generation growing at
// random points, entry s committed at time 1000+10*s.
func newFakeLog(r *rand.Rand, first, last uint64) *fakeLog {
	l := &fakeLog{}
	g := uint64(1 + r.IntN(3))
	for s := first; s <= last; s++ {
		if r.IntN(20) == 0 {
			g += uint64(1 + r.IntN(2))
		}
		l.ents = append(l.ents, partition.LogEntry{SCN: partition.SCN{Generation: g, Sequence: s}, WriteSet: &partition.WriteSet{Mtime: 1000 + 10*int64(s)}})
	}
	return l
}

// TestStartSCNFindsTheFirstTransactionSince: "now" starts just before the
// first transaction committed at or after the stream's creation, whatever
// the generations, reading far fewer entries than the log holds; the
// reader accepts the position and reads exactly that transaction next.
// "earliest" starts before the oldest retained one.
func TestStartSCNFindsTheFirstTransactionSince(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for round := range 300 {
		first := uint64(1 + r.IntN(50))
		last := first + uint64(r.IntN(2000))
		l := newFakeLog(r, first, last)
		// Every point: before the log, inside, after its end.
		since := int64(1000 + 10*int(first) - 20 + r.IntN(int(10*(last-first))+60))
		l.reads = 0
		got, err := startSCN(l, false, since)
		if err != nil {
			t.Fatal(err)
		}
		var want *partition.LogEntry
		for i := range l.ents {
			if l.ents[i].Mtime >= since {
				want = &l.ents[i]
				break
			}
		}
		rd, err := changes.NewReader(l, changes.Position{SCN: got}, changes.Filter{})
		if err != nil {
			t.Fatalf("round %d: reader refuses start %s: %v", round, got, err)
		}
		what := fmt.Sprintf("round %d: log %d..%d, since %d: start %s", round, first, last, since, got)
		switch {
		case want == nil:
			if got != l.Applied() {
				t.Fatalf("%s, want after the last entry %s", what, l.Applied())
			}
		default:
			if got.Sequence != want.SCN.Sequence-1 {
				t.Fatalf("%s, want just before %s", what, want.SCN)
			}
			// The reader's next entry is the one sought.
			ents, _ := l.ReadLog(rd.Position().SCN, 1)
			if len(ents) == 0 || ents[0].SCN != want.SCN {
				t.Fatalf("%s: the reader would read %v next, want %s", what, ents, want.SCN)
			}
		}
		if l.reads > 200 {
			t.Fatalf("%s: %d reads of a %d-entry log", what, l.reads, len(l.ents))
		}

		got, err = startSCN(l, true, since)
		if err != nil || got.Sequence != first-1 || got.Generation != l.ents[0].SCN.Generation {
			t.Fatalf("round %d: earliest = %s, %v; want before %s", round, got, err, l.ents[0].SCN)
		}
	}
	// An empty log starts at the replica's applied SCN.
	if got, err := startSCN(&fakeLog{}, false, 5); err != nil || got != (partition.SCN{}) {
		t.Fatalf("empty log: %s, %v", got, err)
	}
}
