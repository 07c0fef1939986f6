package partition

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/query"
	"github.com/doppio-db/doppio/internal/schema"
)

// BenchmarkInboxPage is the mailbox benchmark's inbox query on a mailbox of
// 100 messages of about 1 KiB among 50 mailboxes, flushed to sstables: isInbox:true, newest
// first, a page of 20, with the documents. "gets" reads each document with
// its own point lookup after the query (as the API did); "iterator" reads
// them through the query's iterator (QueryDocuments).
//
//	go test -run '^$' -bench InboxPage -benchmem ./internal/partition
func BenchmarkInboxPage(b *testing.B) {
	f := newFixture(b)
	msgs := table(b, "Msg", []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long"}},
		`{"type":"record","name":"M","fields":[
			{"name":"subject","type":"string"},
			{"name":"body","type":"string","index":"text"},
			{"name":"isInbox","type":"boolean","index":"attribute"},
			{"name":"createdOn","type":"long","index":"attribute"},
			{"name":"filler","type":"string"}]}`)
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string { return fmt.Sprintf("w%d", r.IntN(200)) }
	for box := range 50 {
		var ops []Operation
		for id := range 100 {
			var body []string
			for range 40 {
				body = append(body, word())
			}
			ops = append(ops, put(msgs, keys.Tuple{fmt.Sprintf("m%d", box), int64(id)}, schema.Document{
				"subject": word(), "body": strings.Join(body, " "), "isInbox": r.IntN(5) != 0,
				"createdOn": int64(1_700_000_000_000 + id*1000 + r.IntN(500)), "filler": strings.Repeat("x", 600),
			}))
		}
		f.exec(b, ops...)
	}
	if err := f.engine.Flush(); err != nil {
		b.Fatal(err)
	}
	plan, err := query.Compile("isInbox:true", "-createdOn", query.SchemaOf(msgs))
	if err != nil {
		b.Fatal(err)
	}
	opts := index.Options{Sort: plan.Sort, Limit: 20}
	group, _ := keys.EncodeTuple(keys.Tuple{"m7"})
	b.Run("gets", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := f.rep.Query(msgs.Def.Name, group, nil, plan.Op, opts)
			if err != nil || len(res.Keys) != 20 {
				b.Fatal(err, len(res.Keys))
			}
			for _, k := range res.Keys {
				if _, ok, err := f.rep.Get(msgs.Def.Name, append(append([]byte(nil), group...), k...)); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		}
	})
	b.Run("iterator", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, recs, _, err := f.rep.QueryDocuments(msgs.Def.Name, group, nil, plan.Op, opts, nil)
			if err != nil || len(res.Keys) != 20 || len(recs) != 20 {
				b.Fatal(err, len(res.Keys))
			}
		}
	})
}
