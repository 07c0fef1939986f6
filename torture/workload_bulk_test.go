package torture

import (
	"fmt"
	"testing"

	"github.com/doppio-db/doppio/client/changes"
)

// bev is a stream event writing src ("load" or a write's token) to key k.
func bev(scn, k, src string, n int) changeLine {
	return changeLine{Event: changes.Event{SCN: scn, Table: "Item", Key: []any{k}, Op: "update",
		After: []byte(fmt.Sprintf(`{"src":%q,"n":%d,"pad":""}`, src, n))}}
}

// bulkFixture: three input records loaded in one chunk at 1:7; a write
// to k00001 before it (overwritten), one to k00002 after it (kept), one
// to a key of its own, one that never landed and one refused.
func bulkFixture() (synth, []changeLine, map[string]bulkDoc) {
	var s synth
	w := func(tok, key string, o Outcome, scn string) {
		s.add(0, "write", key, true, bulkWrite{Key: key, Token: tok}, scn, o, len(s.ops), len(s.ops)+1)
	}
	s.add(0, "load", "", true, nil, "L", Acked, 0, 1)
	w("w0-1", "k00001", Acked, "1:5")
	w("w1-1", "k00002", Acked, "1:9")
	w("w2-1", "w2-1", Acked, "2:3")
	w("w0-2", "k00000", Indeterminate, "")
	w("w1-2", "w1-2", Failed, "")
	evs := []changeLine{
		bev("1:5", "k00001", "w0-1", -1),
		bev("1:7", "k00000", "load", 0), bev("1:7", "k00001", "load", 1), bev("1:7", "k00002", "load", 2),
		bev("1:9", "k00002", "w1-1", -1),
		bev("2:3", "w2-1", "w2-1", -1),
	}
	final := map[string]bulkDoc{"k00000": {Src: "load"}, "k00001": {Src: "load"}, "k00002": {Src: "w1-1"}, "w2-1": {Src: "w2-1"}}
	return s, evs, final
}

func TestBulkCheckerAcceptsMergedLoad(t *testing.T) {
	s, evs, final := bulkFixture()
	if res := judgeBulk(Result{}, 3, s.ops, evs, final); !res.OK() {
		t.Fatalf("valid history judged %+v", res)
	}
}

func TestBulkCheckerFindsSkippedDoubledAndOverwritten(t *testing.T) {
	for _, c := range []struct {
		name        string
		change      func(evs []changeLine, final map[string]bulkDoc) []changeLine
		lost, viols int
	}{
		{"a record skipped", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			delete(final, "k00000")
			return append(evs[:1:1], evs[2:]...)
		}, 1, 0},
		{"a record loaded twice", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			return append(evs[:4:4], append([]changeLine{bev("1:8", "k00002", "load", 2)}, evs[4:]...)...)
		}, 0, 1},
		{"a later write overwritten by the load", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			final["k00002"] = bulkDoc{Src: "load"}
			return evs
		}, 1, 1},
		{"an earlier write the load did not replace", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			final["k00001"] = bulkDoc{Src: "w0-1"}
			return evs
		}, 0, 2},
		{"an acknowledged write missing from the stream", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			delete(final, "w2-1")
			return evs[:5]
		}, 1, 0},
		{"a document nothing wrote", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			final["zz"] = bulkDoc{Src: "load"}
			return evs
		}, 0, 1},
		{"a refused write applied", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			final["w1-2"] = bulkDoc{Src: "w1-2"}
			return append(evs, bev("2:4", "w1-2", "w1-2", -2))
		}, 0, 1},
		{"a record of another key", func(evs []changeLine, final map[string]bulkDoc) []changeLine {
			final["k00009"] = bulkDoc{Src: "load"}
			return append(evs, bev("2:4", "k00009", "load", 9))
		}, 0, 1},
	} {
		s, evs, final := bulkFixture()
		evs = c.change(evs, final)
		if res := judgeBulk(Result{}, 3, s.ops, evs, final); res.Lost != c.lost || res.Violations != c.viols {
			t.Errorf("%s: lost %d violations %d, want %d %d: %v", c.name, res.Lost, res.Violations, c.lost, c.viols, res.Failures)
		}
	}
}
