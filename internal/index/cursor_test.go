package index_test

import (
	"math/rand/v2"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
)

// TestCursorIsStableUnderWrites pages through a query while documents are
// inserted and deleted between pages: every document that exists (unchanged)
// throughout comes exactly once, in order.
func TestCursorIsStableUnderWrites(t *testing.T) {
	for _, srt := range []index.Sort{{}, {Field: "n"}, {Field: "n", Desc: true}, {Field: "tags", Multi: true}, {Field: "tags", Desc: true, Multi: true}} {
		t.Run(srt.String(), func(t *testing.T) {
			r := rand.New(rand.NewPCG(11, 12))
			s := newStore(t, modelIndexes)
			g := str("g")
			stable := map[string]bool{}
			for i := range 60 {
				d := randDoc(r)
				s.put(g, tuple("x", int64(i*2)), d)
				stable[string(tuple("x", int64(i*2)))] = true
			}
			seen := map[string]int{}
			var order [][]byte
			cursor := ""
			for pages := 0; pages < 200; pages++ {
				res, err := index.Execute(s.e, s.p, s.table, g, nil, index.All{}, index.Options{Sort: srt, Limit: 4, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				for _, k := range res.Keys {
					seen[string(k)]++
					order = append(order, k)
				}
				if cursor = res.Next; cursor == "" {
					break
				}
				// Concurrent writes: new documents anywhere in the order, and
				// deletes of other new ones.
				for range 3 {
					k := tuple("x", int64(r.IntN(130)*2+1))
					if _, ok := s.docs[string(g)+string(k)]; ok {
						s.put(g, k, nil)
					} else {
						s.put(g, k, randDoc(r))
					}
				}
			}
			for k := range stable {
				if seen[k] != 1 {
					t.Fatalf("document %v seen %d times", render([][]byte{[]byte(k)}), seen[k])
				}
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("document %v seen %d times", render([][]byte{[]byte(k)}), n)
				}
			}
			// The stable documents come in the order of the final state.
			want := expected(s.docs, g, nil, index.All{}, srt)
			var wantStable, gotStable []string
			for _, k := range want {
				if stable[k] {
					wantStable = append(wantStable, k)
				}
			}
			for _, k := range order {
				if stable[string(k)] {
					gotStable = append(gotStable, string(k))
				}
			}
			if len(wantStable) != len(gotStable) {
				t.Fatalf("%d stable documents, want %d", len(gotStable), len(wantStable))
			}
			for i := range wantStable {
				if wantStable[i] != gotStable[i] {
					t.Fatalf("stable document %d out of order", i)
				}
			}
		})
	}
}
