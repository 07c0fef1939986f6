package index_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/storage"
)

// store writes documents and their index entries the way the write path
// does: the document and its index diff in one batch.
type store struct {
	t       testing.TB
	e       *storage.Engine
	p       keys.Partition
	table   string
	indexes []schema.Index
	docs    map[string]schema.Document // group+rest -> document
	// bulk writes text entries as a segment of their own, as a write of
	// many documents does, instead of pending.
	bulk bool
	seg  uint64 // the last segment id a fold used
}

func newStore(t testing.TB, indexes []schema.Index) *store {
	t.Helper()
	e, err := storage.Open(t.TempDir(), storage.Options{CacheBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &store{t: t, e: e, p: keys.PartitionPrefix("db", 3), table: "T", indexes: indexes, docs: map[string]schema.Document{}}
}

// put inserts or replaces a document; nil deletes it. With s.bulk set, its
// text goes to a segment of its own, as in a write of many documents.
func (s *store) put(group, rest []byte, doc schema.Document) {
	s.t.Helper()
	id := string(group) + string(rest)
	b := s.e.NewBatch()
	puts, dels, err := index.Diff(s.indexes, s.p, s.table, group, rest, s.docs[id], doc, s.read)
	if err != nil {
		s.t.Fatal(err)
	}
	var refs []index.PendingRef
	var values [][]byte
	if s.bulk {
		puts = slices.DeleteFunc(puts, func(e index.Entry) bool {
			if e.Pending() {
				refs, values = append(refs, e.PendingRef()), append(values, e.Value)
				dels = append(dels, e.Key)
			}
			return e.Pending()
		})
		s.seg++
		seg, err := index.FoldSegment(s.seg, refs, values)
		if err != nil {
			s.t.Fatal(err)
		}
		puts = append(puts, seg...)
	}
	// Deletes first, as the partition applies them: a put of a key they
	// name wins.
	for _, k := range dels {
		b.Delete(k)
	}
	for _, e := range puts {
		b.Set(e.Key, e.Value)
	}
	dk := s.p.Document(s.table, append(append([]byte{}, group...), rest...))
	if doc == nil {
		b.Delete(dk)
		delete(s.docs, id)
	} else {
		b.Set(dk, []byte("record"))
		s.docs[id] = doc
	}
	if err := s.e.Commit(b); err != nil {
		s.t.Fatal(err)
	}
}

// backfill writes a live document's entries in the final form (a term per
// entry), as a backfill does when it meets a document the write path has
// indexed already: its text is then in two forms.
func (s *store) backfill(group, rest []byte) {
	s.t.Helper()
	b := s.e.NewBatch()
	for _, e := range index.Entries(s.indexes, s.p, s.table, group, rest, s.docs[string(group)+string(rest)]) {
		b.Set(e.Key, e.Value)
	}
	if err := s.e.Commit(b); err != nil {
		s.t.Fatal(err)
	}
}

// fold moves the group's pending text entries into a segment, as the
// partition's fold job does.
func (s *store) fold(group []byte) { s.foldEvery(group, 1<<20) }

// foldEvery folds the group's pending text entries into segments of per
// documents each, as many folds of per would, and returns how many
// segments it wrote.
func (s *store) foldEvery(group []byte, per int) (segments int) {
	s.t.Helper()
	var fields []string
	for _, ix := range s.indexes {
		if ix.Kind == "text" {
			fields = append(fields, ix.String())
		}
	}
	refs, more, err := index.PendingKeys(s.e, s.p, s.table, group, fields, 1<<20)
	if err != nil || more {
		s.t.Fatal(err, more)
	}
	for len(refs) > 0 {
		n := min(per, len(refs))
		b := s.e.NewBatch()
		values := make([][]byte, n)
		for i, ref := range refs[:n] {
			if values[i], err = s.e.Get(ref.Key); err != nil {
				s.t.Fatal(err)
			}
			b.Delete(ref.Key)
		}
		s.seg++
		entries, err := index.FoldSegment(s.seg, refs[:n], values)
		if err != nil {
			s.t.Fatal(err)
		}
		for _, e := range entries {
			b.Set(e.Key, e.Value)
		}
		if err := s.e.Commit(b); err != nil {
			s.t.Fatal(err)
		}
		refs = refs[n:]
		segments++
	}
	return segments
}

// purge drops the group's dead postings (index.PurgeDead) in small
// batches, of which it applies the first n only (all when n < 0), as a
// purge cut short by a lost leadership does.
func (s *store) purge(group []byte, n int) {
	s.t.Helper()
	for _, ix := range s.indexes {
		if ix.Kind != "text" {
			continue
		}
		batches, deletes, _, err := index.PurgeDead(s.e, s.p.Index(s.table, group, ix.String()), 1, 200)
		if err != nil {
			s.t.Fatal(err)
		}
		for i, puts := range batches {
			if i == n {
				break
			}
			b := s.e.NewBatch()
			for _, k := range deletes[i] {
				b.Delete(k)
			}
			for _, e := range puts {
				b.Set(e.Key, e.Value)
			}
			if err := s.e.Commit(b); err != nil {
				s.t.Fatal(err)
			}
		}
	}
}

// read reads a key for index.Diff: nil when absent.
func (s *store) read(key []byte) ([]byte, error) {
	v, err := s.e.Get(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return v, err
}

func str(s string) []byte { return keys.AppendString(nil, s) }

func tuple(parts ...any) []byte {
	b, err := keys.EncodeTuple(keys.Tuple(parts))
	if err != nil {
		panic(err)
	}
	return b
}

// render decodes result keys for comparison.
func render(ks [][]byte) []string {
	out := []string{}
	for _, k := range ks {
		t, err := keys.DecodeTuple(k)
		if err != nil {
			out = append(out, "!"+err.Error())
			continue
		}
		out = append(out, t.String())
	}
	return out
}

func mustJSON(t testing.TB, tb *schema.Table, s string) schema.Document {
	t.Helper()
	d, err := tb.DecodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return d
}

func mustCompile(t testing.TB, schemaJSON string) *schema.Table {
	t.Helper()
	tb, err := schema.Compile(schema.TableDef{
		Database: "db", Name: "T",
		Key:      []schema.KeyPart{{Name: "mbox", Type: schema.KeyString}, {Name: "id", Type: schema.KeyLong}},
		Versions: []schema.Version{{Version: 1, Schema: json.RawMessage(schemaJSON)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}
