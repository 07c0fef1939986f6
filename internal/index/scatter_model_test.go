package index_test

import (
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
)

// cluster is several partitions (separate key prefixes of one store), each
// holding some document groups, as a database spread over partitions.
type cluster struct {
	parts   []*store
	groupOf map[string]int // encoded group -> partition index
}

func newCluster(t testing.TB, indexes []schema.Index, n int) *cluster {
	base := newStore(t, indexes)
	c := &cluster{groupOf: map[string]int{}}
	for i := range n {
		c.parts = append(c.parts, &store{t: t, e: base.e, p: keys.PartitionPrefix("db", i+1), table: base.table,
			indexes: indexes, docs: map[string]schema.Document{}})
	}
	return c
}

// put writes to the partition of group (a group lives in one partition).
func (c *cluster) put(group, rest []byte, doc schema.Document) {
	c.parts[c.groupOf[string(group)]].put(group, rest, doc)
}

func (c *cluster) has(group, rest []byte) bool {
	_, ok := c.parts[c.groupOf[string(group)]].docs[string(group)+string(rest)]
	return ok
}

// docs returns every document of every partition by whole key.
func (c *cluster) docs() map[string]schema.Document {
	all := map[string]schema.Document{}
	for _, p := range c.parts {
		maps.Copy(all, p.docs)
	}
	return all
}

// query pages through q over every partition: ExecuteAll on each with the
// same cursor, Merge, next page. It checks the page invariants.
func (c *cluster) query(t testing.TB, op index.Op, s index.Sort, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		var results []index.Result
		for _, p := range c.parts {
			res, err := index.ExecuteAll(p.e, p.p, p.table, op, index.Options{Sort: s, Limit: limit, Cursor: cursor})
			if err != nil {
				t.Fatalf("%s sort %s: %v", op, s, err)
			}
			checkPage(t, res, limit)
			results = append(results, res)
		}
		res := index.Merge(s, limit, results...)
		checkPage(t, res, limit)
		for _, k := range res.Keys {
			got = append(got, string(k))
		}
		if cursor = res.Next; cursor == "" {
			return got
		}
		if pages > 1000 {
			t.Fatalf("%s sort %s limit %d: more than 1000 pages", op, s, limit)
		}
	}
}

// checkPage: at most limit keys, and a Next only after a full page.
func checkPage(t testing.TB, res index.Result, limit int) {
	t.Helper()
	if (limit > 0 && len(res.Keys) > limit) || (res.Next != "" && len(res.Keys) != limit) {
		t.Fatalf("limit %d: page of %d keys, next %q", limit, len(res.Keys), res.Next)
	}
}

// modelGroups: partition keys whose encodings test the order (empty, a
// zero byte, one a prefix of another), spread over 3 partitions.
var modelGroups = [][]byte{str(""), str("a"), str("a\x00"), str("ab"), str("b"), str("m1"), str("m2"), str("zz")}

var modelSorts = []index.Sort{{}, {Field: "s"}, {Field: "n", Desc: true}, {Field: "n"}, {Field: "f", Desc: true},
	{Field: "b"}, {Field: "tags", Multi: true}, {Field: "tags", Desc: true, Multi: true}, {Field: "addr.city", Desc: true}}

// TestQueryWithoutPartitionKeyEqualsBruteForce writes random documents in
// several groups of several partitions and pages random queries and sorts
// over all of them (ExecuteAll on each partition, Merge) with small page
// sizes, against a brute-force evaluation of the documents of every group
// in whole key order. Single partitions are checked alone too.
func TestQueryWithoutPartitionKeyEqualsBruteForce(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay: go test -run TestQueryWithoutPartitionKeyEqualsBruteForce -model.seed %d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 8))
	c := newCluster(t, modelIndexes, 3)
	for i, g := range modelGroups {
		c.groupOf[string(g)] = (i * 7) % 3
	}
	queries, nonEmpty := 0, 0
	for step := range 250 {
		g := modelGroups[r.IntN(len(modelGroups))]
		rest := tuple([]string{"x", "y"}[r.IntN(2)], int64(r.IntN(12)))
		part := c.parts[c.groupOf[string(g)]]
		part.bulk = r.IntN(4) == 0 // its text in a segment of its own
		if c.has(g, rest) && r.IntN(4) == 0 {
			c.put(g, rest, nil)
		} else {
			c.put(g, rest, randDoc(r))
		}
		// Groups' text pending, folded into segments, with dead postings
		// or purged: a query over every group reads each group's own.
		if r.IntN(8) == 0 {
			part.fold(g)
		}
		if r.IntN(10) == 0 {
			part.purge(g, -1)
		}
		if step%5 != 0 {
			continue
		}
		for range 8 {
			queries++
			op := randOp(r, 3)
			srt := modelSorts[r.IntN(len(modelSorts))]
			limit := []int{0, 1, 2, 3, 7, 20}[r.IntN(6)]
			// Every partition, merged.
			want := expected(c.docs(), nil, nil, op, srt)
			if len(want) > 0 {
				nonEmpty++
			}
			if got := c.query(t, op, srt, limit); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: %s sort %s limit %d:\n got %v\nwant %v", seed, step, op, srt, limit,
					render(toBytes(got)), render(toBytes(want)))
			}
			// One partition alone.
			p := c.parts[r.IntN(len(c.parts))]
			want = expected(p.docs, nil, nil, op, srt)
			var got []string
			cursor := ""
			for pages := 0; pages < 1000; pages++ {
				res, err := index.ExecuteAll(p.e, p.p, p.table, op, index.Options{Sort: srt, Limit: limit, Cursor: cursor})
				if err != nil {
					t.Fatal(err)
				}
				checkPage(t, res, limit)
				for _, k := range res.Keys {
					got = append(got, string(k))
				}
				if cursor = res.Next; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: one partition: %s sort %s limit %d:\n got %v\nwant %v", seed, step, op, srt, limit,
					render(toBytes(got)), render(toBytes(want)))
			}
			// Counts.
			var counts []index.Result
			for _, p := range c.parts {
				res, err := index.ExecuteAll(p.e, p.p, p.table, op, index.Options{Count: true})
				if err != nil {
					t.Fatal(err)
				}
				counts = append(counts, res)
			}
			if n, want := index.Merge(srt, limit, counts...).Count, len(expected(c.docs(), nil, nil, op, srt)); n != want {
				t.Fatalf("seed %d step %d: %s: count %d, want %d", seed, step, op, n, want)
			}
		}
	}
	t.Logf("%d queries (%d with matches) over %d documents", queries, nonEmpty, len(c.docs()))
}

// TestQueryWithoutPartitionKeyIsStableUnderWrites pages through queries
// over every partition while documents are inserted and deleted between
// pages in several groups of every partition: every document that exists
// (unchanged) throughout comes exactly once, in order, and no document
// twice.
func TestQueryWithoutPartitionKeyIsStableUnderWrites(t *testing.T) {
	for _, srt := range modelSorts {
		for _, op := range []index.Op{index.All{}, index.Equal{Field: "b", Value: true}} {
			t.Run(srt.String()+" "+op.String(), func(t *testing.T) {
				r := rand.New(rand.NewPCG(21, 22))
				c := newCluster(t, modelIndexes, 3)
				groups := [][]byte{str("a"), str("b"), str("c"), str("d"), str("e"), str("f")}
				for i, g := range groups {
					c.groupOf[string(g)] = i % 3
				}
				stable := map[string]bool{}
				for i := range 90 {
					g := groups[i%len(groups)]
					k := tuple("x", int64(i/len(groups)*2))
					c.put(g, k, randDoc(r))
					stable[string(g)+string(k)] = true
				}
				seen := map[string]int{}
				written := map[string]bool{}
				var order []string
				cursor := ""
				for pages := 0; pages < 500; pages++ {
					var results []index.Result
					for _, p := range c.parts {
						res, err := index.ExecuteAll(p.e, p.p, p.table, op, index.Options{Sort: srt, Limit: 4, Cursor: cursor})
						if err != nil {
							t.Fatal(err)
						}
						results = append(results, res)
					}
					res := index.Merge(srt, 4, results...)
					for _, k := range res.Keys {
						seen[string(k)]++
						order = append(order, string(k))
					}
					if cursor = res.Next; cursor == "" {
						break
					}
					// Concurrent writes: new documents (odd ids) anywhere in
					// the order in every group, and deletes of other new ones.
					// A key is written once: a document never changes, so none
					// may come twice.
					for range 4 {
						g := groups[r.IntN(len(groups))]
						k := tuple("x", int64(r.IntN(60)*2+1))
						switch {
						case c.has(g, k):
							c.put(g, k, nil)
						case !written[string(g)+string(k)]:
							c.put(g, k, randDoc(r))
							written[string(g)+string(k)] = true
						}
					}
				}
				if cursor != "" {
					t.Fatal("no last page")
				}
				for k, n := range seen {
					if n != 1 {
						t.Fatalf("document %v seen %d times", render([][]byte{[]byte(k)}), n)
					}
				}
				var wantStable, gotStable []string
				for _, k := range expected(c.docs(), nil, nil, op, srt) {
					if stable[k] {
						wantStable = append(wantStable, k)
					}
				}
				for _, k := range order {
					if stable[k] {
						gotStable = append(gotStable, k)
					}
				}
				if !slices.Equal(gotStable, wantStable) {
					t.Fatalf("stable documents:\n got %v\nwant %v", render(toBytes(gotStable)), render(toBytes(wantStable)))
				}
				if len(wantStable) == 0 || (op == index.All{} && len(wantStable) != len(stable)) {
					t.Fatalf("%d stable documents matched of %d", len(wantStable), len(stable))
				}
			})
		}
	}
}
