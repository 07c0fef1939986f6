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

// mailIndexes: the MailboxDB shape of the paper's section 7.4.
var mailIndexes = []schema.Index{
	{Path: []string{"subject"}, Kind: "text", Type: "string"},
	{Path: []string{"isInbox"}, Kind: "attribute", Type: "boolean"},
	{Path: []string{"createdOn"}, Kind: "attribute", Type: "long", Logical: "timestamp-millis"},
	{Path: []string{"folder"}, Kind: "attribute", Type: "string"},
}

// commitFull commits batch once it holds more than 4 MiB and returns the
// batch to go on with, so that a bulk load stays within memory.
func (s *store) commitFull(b *testing.B, batch *storage.Batch) *storage.Batch {
	if batch.Len() <= 4<<20 {
		return batch
	}
	s.commit(b, batch)
	return s.e.NewBatch()
}

// commit commits batch, failing the benchmark on an error.
func (s *store) commit(b *testing.B, batch *storage.Batch) {
	if err := s.e.Commit(batch); err != nil {
		b.Fatal(err)
	}
}

// loadMailbox writes n messages of mailbox "m" in batches (entries only,
// plus the document keys), their text entries in the final form or, with
// pending set, in the pending form the write path writes.
func loadMailbox(b *testing.B, n int, pending bool) *store {
	s := newStore(b, mailIndexes)
	r := rand.New(rand.NewPCG(1, uint64(n)))
	words := make([]string, 2000)
	for i := range words {
		words[i] = fmt.Sprintf("w%d", i)
	}
	g := str("m")
	batch := s.e.NewBatch()
	for i := range n {
		var subj []string
		for range 6 {
			subj = append(subj, words[int(r.ExpFloat64()*200)%len(words)])
		}
		if i%10 == 0 {
			subj = append(subj, "meeting")
		}
		doc := schema.Document{
			"subject":   strings.Join(subj, " "),
			"isInbox":   r.IntN(2) == 0,
			"createdOn": int64(1_700_000_000_000 + r.IntN(1_000_000_000)),
			"folder":    []string{"inbox", "work", "travel"}[r.IntN(3)],
		}
		rest := keys.AppendInt(nil, int64(i))
		entries := index.Entries(mailIndexes, s.p, s.table, g, rest, doc)
		if pending {
			entries, _, _ = index.Diff(mailIndexes, s.p, s.table, g, rest, nil, doc, s.read)
		}
		for _, e := range entries {
			batch.Set(e.Key, e.Value)
		}
		batch.Set(s.p.Document(s.table, append(append([]byte{}, g...), rest...)), make([]byte, 300))
		batch = s.commitFull(b, batch)
	}
	s.commit(b, batch)
	return s
}

// benchQuery runs the query q sorted by sort, first page of 20, over s's
// mailbox; check vets each answer.
func benchQuery(b *testing.B, s *store, q, sort string, check func(index.Result) bool) {
	p, err := query.Compile(q, sort, query.Schema{Indexes: mailIndexes})
	if err != nil {
		b.Fatal(err)
	}
	opts := index.Options{Sort: p.Sort, Limit: 20}
	b.ResetTimer()
	for b.Loop() {
		res, err := index.Execute(s.e, s.p, s.table, str("m"), nil, p.Op, opts)
		if err != nil || !check(res) {
			b.Fatalf("%d keys, %d pending, %v", len(res.Keys), res.Pending, err)
		}
	}
}

// BenchmarkQuery: isInbox:true AND subject:meeting, sorted by createdOn
// descending, first page of 20; one mailbox of 100 or 50,000 messages.
func BenchmarkQuery(b *testing.B) {
	for _, n := range []int{100, 50_000} {
		b.Run(fmt.Sprintf("docs=%d", n), func(b *testing.B) {
			benchQuery(b, loadMailbox(b, n, false), "isInbox:true AND subject:meeting", "-createdOn", func(res index.Result) bool {
				return len(res.Keys) > 0 && len(res.Keys) <= 20
			})
		})
	}
}

// BenchmarkQueryInbox: the mailbox benchmark's inbox page, isInbox:true
// sorted by createdOn descending, first page of 20, over one mailbox of 100
// messages.
func BenchmarkQueryInbox(b *testing.B) {
	benchQuery(b, loadMailbox(b, 100, false), "isInbox:true", "-createdOn", func(res index.Result) bool {
		return len(res.Keys) == 20
	})
}

// BenchmarkQueryPending: subject:meeting sorted by createdOn descending,
// first page of 20, over a mailbox whose text entries are all folded or
// all pending: what a text query pays per pending entry.
func BenchmarkQueryPending(b *testing.B) {
	for _, n := range []int{100, 512} {
		for _, pending := range []bool{false, true} {
			b.Run(fmt.Sprintf("docs=%d/pending=%t", n, pending), func(b *testing.B) {
				benchQuery(b, loadMailbox(b, n, pending), "subject:meeting", "-createdOn", func(res index.Result) bool {
					return len(res.Keys) > 0 && (res.Pending > 0) == pending
				})
			})
		}
	}
}

// BenchmarkQueryNot: a negation needs every document of the mailbox.
func BenchmarkQueryNot(b *testing.B) {
	for _, n := range []int{100, 50_000} {
		b.Run(fmt.Sprintf("docs=%d", n), func(b *testing.B) {
			s := loadMailbox(b, n, false)
			p, err := query.Compile("NOT folder:inbox", "-createdOn", query.Schema{Indexes: mailIndexes})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := index.Execute(s.e, s.p, s.table, str("m"), nil, p.Op, index.Options{Sort: p.Sort, Limit: 20}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEntries: the entries of one message of the MailboxDB benchmark
// (a text body of 50 words from a 2,000-word vocabulary, three attributes),
// as every insert computes them.
func BenchmarkEntries(b *testing.B) {
	indexes := []schema.Index{
		{Path: []string{"body"}, Kind: "text", Type: "string"},
		{Path: []string{"isInbox"}, Kind: "attribute", Type: "boolean"},
		{Path: []string{"createdOn"}, Kind: "attribute", Type: "long", Logical: "timestamp-millis"},
		{Path: []string{"senderId"}, Kind: "attribute", Type: "string"},
	}
	r := rand.New(rand.NewPCG(1, 2))
	var body []string
	for range 50 {
		body = append(body, fmt.Sprintf("word%d", int(r.ExpFloat64()*300)%2000))
	}
	doc := schema.Document{"body": strings.Join(body, " "), "isInbox": true, "createdOn": int64(1_700_000_000_000), "senderId": "user-1234"}
	p := keys.Partition("\x01MailboxDB\x00\x01\x02")
	group, rest := str("mailbox-A-0001"), keys.AppendInt(nil, 4242)
	b.ReportAllocs()
	for b.Loop() {
		index.Entries(indexes, p, "Message", group, rest, doc)
	}
}

// BenchmarkQuerySegments: text queries over a mailbox of 50,000 messages
// whose text is folded into one segment, or into a segment per 256
// messages, as the fold job leaves a mailbox written a message at a time
// (196): a term's posting blocks are adjacent keys, which the storage
// engine's compactions keep together, so their number costs little. This
// is why segments are not merged (docs/design/index.md, "Segments are
// not merged").
func BenchmarkQuerySegments(b *testing.B) {
	answers := map[string]string{} // query -> its first page, the same from any number of segments
	for _, per := range []int{50_000, 256} {
		s := loadMailbox(b, 50_000, true)
		segments := s.foldEvery(str("m"), per)
		// The folds' deletions of the pending entries, compacted away as
		// they are in a store written over time.
		start := s.p.IndexTable(s.table)
		if err := s.e.Compact(start, keys.PrefixEnd(start)); err != nil {
			b.Fatal(err)
		}
		for _, c := range []struct{ name, q, sort string }{
			{"meeting", "subject:meeting", ""},
			{"meeting-sorted", "subject:meeting", "-createdOn"},
			{"rare", "subject:w150", ""},
		} {
			b.Run(fmt.Sprintf("%s/segments=%d", c.name, segments), func(b *testing.B) {
				benchQuery(b, s, c.q, c.sort, func(res index.Result) bool {
					page := fmt.Sprint(render(res.Keys))
					if want, ok := answers[c.name]; ok {
						return page == want
					}
					answers[c.name] = page
					return len(res.Keys) > 0
				})
			})
		}
	}
}
