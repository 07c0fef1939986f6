package index_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/query"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// loadMailboxes writes groups mailboxes of perGroup messages each (entries
// only, plus the document keys); one message in 10 mentions "meeting".
//
// The store's block cache is 512 MiB: Pebble reserves its memtables' size
// (64 MiB) in the block cache, so newStore's 64 MiB cache holds no block
// and every seek into a flushed table would read and decompress one.
func loadMailboxes(b *testing.B, groups, perGroup int) *store {
	e, err := storage.Open(b.TempDir(), storage.Options{CacheBytes: 512 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	s := &store{t: b, e: e, p: keys.PartitionPrefix("db", 3), table: "T", indexes: mailIndexes, docs: map[string]schema.Document{}}
	r := rand.New(rand.NewPCG(2, uint64(groups)))
	batch := s.e.NewBatch()
	for g := range groups {
		group := str(fmt.Sprintf("mbox%06d", g))
		for i := range perGroup {
			subj := []string{"w" + fmt.Sprint(r.IntN(500)), "w" + fmt.Sprint(r.IntN(500))}
			if r.IntN(10) == 0 {
				subj = append(subj, "meeting")
			}
			doc := schema.Document{
				"subject":   strings.Join(subj, " "),
				"isInbox":   r.IntN(2) == 0,
				"createdOn": int64(1_700_000_000_000 + r.IntN(1_000_000_000)),
				"folder":    []string{"inbox", "work", "travel"}[r.IntN(3)],
			}
			rest := keys.AppendInt(nil, int64(i))
			for _, e := range index.Entries(mailIndexes, s.p, s.table, group, rest, doc) {
				batch.Set(e.Key, e.Value)
			}
			batch.Set(s.p.Document(s.table, append(append([]byte{}, group...), rest...)), make([]byte, 300))
		}
		batch = s.commitFull(b, batch)
	}
	s.commit(b, batch)
	return s
}

// BenchmarkQueryAllGroups: a query without a partition key over a
// partition of many small mailboxes (5 messages each), first page of 20
// and the page after it: isInbox:true AND subject:meeting (about 1 message
// in 20) sorted by createdOn descending, and the same in key order.
func BenchmarkQueryAllGroups(b *testing.B) {
	for _, groups := range []int{1_000, 10_000} {
		s := loadMailboxes(b, groups, 5)
		for _, sort := range []string{"-createdOn", ""} {
			p, err := query.Compile("isInbox:true AND subject:meeting", sort, query.Schema{Indexes: mailIndexes})
			if err != nil {
				b.Fatal(err)
			}
			first, err := index.ExecuteAll(s.e, s.p, s.table, p.Op, index.Options{Sort: p.Sort, Limit: 20})
			if err != nil || len(first.Keys) != 20 || first.Next == "" {
				b.Fatalf("%d keys, %v", len(first.Keys), err)
			}
			for _, pg := range []struct {
				name   string
				cursor string
			}{{"page=1", ""}, {"page=2", first.Next}} {
				b.Run(fmt.Sprintf("groups=%d/sort=%q/%s", groups, sort, pg.name), func(b *testing.B) {
					for b.Loop() {
						res, err := index.ExecuteAll(s.e, s.p, s.table, p.Op, index.Options{Sort: p.Sort, Limit: 20, Cursor: pg.cursor})
						if err != nil || len(res.Keys) != 20 {
							b.Fatalf("%d keys, %v", len(res.Keys), err)
						}
					}
				})
			}
		}
		b.Run(fmt.Sprintf("groups=%d/count", groups), func(b *testing.B) {
			p, _ := query.Compile("isInbox:true AND subject:meeting", "", query.Schema{Indexes: mailIndexes})
			for b.Loop() {
				if _, err := index.ExecuteAll(s.e, s.p, s.table, p.Op, index.Options{Count: true}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
