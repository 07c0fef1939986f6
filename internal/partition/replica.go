package partition

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/storage"
)

// Limits bound what one request may write, and carry the replica's
// testing knobs.
type Limits struct {
	// MaxDocumentBytes bounds one document's Avro encoding (default 1 MiB).
	MaxDocumentBytes int
	// MaxWriteSetBytes bounds one transaction's write set (default 64 MiB).
	MaxWriteSetBytes int
	// BackfillRate bounds how many documents per second an index backfill
	// indexes in one partition, so it does not starve live traffic
	// (default DefaultBackfillRate).
	BackfillRate int
	// Knobs, when not nil, change when the replica folds and purges (tests).
	Knobs *TestingKnobs
}

// TestingKnobs let a test fold and purge after a few writes, or act inside
// a fold. The zero value (and a nil *TestingKnobs) is production's.
type TestingKnobs struct {
	// FoldAfter, when positive, replaces foldAfter: how many pending
	// entries a document group's writes add before the group is folded.
	FoldAfter int
	// PurgeAfter, when positive, replaces purgeAfter: how many dead
	// postings a text list holds before its group's fold job purges them.
	PurgeAfter int
	// BeforeFoldWrite, when set, runs after a fold read the values it
	// folds and before it replicates them.
	BeforeFoldWrite func()
}

func (l Limits) withDefaults() Limits {
	if l.MaxDocumentBytes <= 0 {
		l.MaxDocumentBytes = 1 << 20
	}
	if l.BackfillRate <= 0 {
		l.BackfillRate = DefaultBackfillRate
	}
	if l.MaxWriteSetBytes <= 0 {
		l.MaxWriteSetBytes = 64 << 20
	}
	return l
}

// Replica is one hosted partition.
type Replica struct {
	DB     string
	ID     int
	prefix keys.Partition
	engine *storage.Engine
	repl   Replicator
	limits Limits
	latch  latches
	idx    indexes
	folds  folding
	// claims are the idempotency scopes of the requests under way.
	claims claims
}

// New returns the replica of partition id of db, stored in e and replicated
// by r.
func New(e *storage.Engine, db string, id int, r Replicator, limits Limits) *Replica {
	rep := &Replica{
		DB: db, ID: id,
		prefix: keys.PartitionPrefix(db, id),
		engine: e,
		repl:   r,
		limits: limits.withDefaults(),
	}
	rep.folds.configure(limits.Knobs)
	return rep
}

// Prefix is the key prefix of everything this partition stores.
func (r *Replica) Prefix() keys.Partition { return r.prefix }

// Applied is the SCN of the last applied transaction.
func (r *Replica) Applied() SCN { return r.repl.Applied() }

// ReadFence returns when a read of the document group whose encoded
// partition key is group may proceed: every write of the group answered
// before the call is visible, and no write that is applied but not yet
// durable is. (The storage engine makes a batch visible before its WAL sync
// completes; the group's latch is held until the sync, so waiting for it is
// enough.) A replicator that applies only durable write sets (Raft: its log
// is synced before an entry commits) needs no wait: what is visible is
// durable, and an answered write was applied before its answer.
func (r *Replica) ReadFence(ctx context.Context, group []byte) error {
	if d, ok := r.repl.(DurableApplier); ok && d.AppliesDurableWrites() {
		return nil
	}
	if err := r.latch.wait(ctx, string(group)); err != nil {
		return problem.New(problem.Unavailable, "timed out waiting for document group: %v", err)
	}
	return nil
}

// Get returns the document of table under the encoded full key. The
// record's Avro may be the row cache's own bytes: read them, never write
// into them.
func (r *Replica) Get(table string, key []byte) (Record, bool, error) {
	v, err := r.engine.GetShared(r.prefix.Document(table, key))
	if errors.Is(err, storage.ErrNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	rec, err := decodeRecord(v)
	if err != nil {
		return Record{}, false, fmt.Errorf("document %x: %w", key, err)
	}
	return rec, true, nil
}

// Entry is one document of a scan.
type Entry struct {
	Key    []byte // encoded full key
	Record Record
}

// Scan returns up to limit documents of table whose key starts with the
// encoded prefix, in key order, starting after the encoded key after (nil:
// from the start), and whether more follow.
func (r *Replica) Scan(table string, prefix, after []byte, limit int) ([]Entry, bool, error) {
	tp := r.prefix.Table(table)
	lower := append(append([]byte(nil), tp...), prefix...)
	upper := keys.PrefixEnd(lower)
	if after != nil {
		if !bytes.HasPrefix(after, prefix) {
			return nil, false, nil
		}
		lower = append(append(append([]byte(nil), tp...), after...), 0)
	}
	it, err := r.engine.NewIter(lower, upper)
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	var out []Entry
	for ok := it.First(); ok; ok = it.Next() {
		if len(out) == limit {
			return out, true, nil
		}
		rec, err := decodeRecord(it.Value())
		if err != nil {
			return nil, false, err
		}
		rec.Avro = append([]byte(nil), rec.Avro...)
		out = append(out, Entry{Key: append([]byte(nil), it.Key()[len(tp):]...), Record: rec})
	}
	return out, false, it.Error()
}

// Query runs a secondary-index query over the collection of table in the
// document group group (encoded partition key), narrowed to the encoded
// leading key parts restPrefix that follow the partition key.
func (r *Replica) Query(table string, group, restPrefix []byte, op index.Op, o index.Options) (index.Result, error) {
	res, err := index.Execute(r.engine, r.prefix, table, group, restPrefix, op, o)
	r.foldIfPiled(table, group, res)
	return res, err
}

// QueryDocuments is Query with the documents of the page, read through the
// query's own iterator: the same point in time as the index lists (every
// key listed has its document: entries and documents are written in one
// batch), and positioned by forward seeks in key order rather than one
// point lookup, each with its own iterator, per document. Records[i] is
// the document of Keys[i]; their Avro bytes are appended to buf, returned
// grown, which the caller may use again once it is done with the records.
// (A key without a document, which only an index being repaired could
// list, is left out of Keys.)
func (r *Replica) QueryDocuments(table string, group, restPrefix []byte, op index.Op, o index.Options, buf []byte) (index.Result, []Record, []byte, error) {
	it, err := r.engine.NewIter(r.prefix, r.prefix.End())
	if err != nil {
		return index.Result{}, nil, buf, err
	}
	defer it.Close()
	res, err := index.ExecuteIter(it, r.prefix, table, group, restPrefix, op, o)
	r.foldIfPiled(table, group, res)
	if err != nil || len(res.Keys) == 0 {
		return res, nil, buf, err
	}
	base := r.prefix.Document(table, group)
	it.SetBounds(base, keys.PrefixEnd(base))
	order := make([]int, len(res.Keys))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(res.Keys[a], res.Keys[b]) })
	recs := make([]Record, len(res.Keys))
	found := make([]bool, len(res.Keys))
	avro := buf[:0] // one buffer for every document's bytes
	key := slices.Clip(base)
	for _, i := range order {
		key = append(key[:len(base)], res.Keys[i]...)
		if !it.SeekGE(key) || !bytes.Equal(it.Key(), key) {
			if err := it.Error(); err != nil {
				return index.Result{}, nil, buf, err
			}
			continue
		}
		rec, err := decodeRecord(it.Value())
		if err != nil {
			return index.Result{}, nil, buf, fmt.Errorf("document %x: %w", res.Keys[i], err)
		}
		if len(avro) == 0 {
			avro = slices.Grow(avro, len(rec.Avro)*len(res.Keys)*5/4)
		}
		start := len(avro)
		avro = append(avro, rec.Avro...)
		rec.Avro = avro[start:len(avro):len(avro)]
		recs[i], found[i] = rec, true
	}
	n := 0
	for i, ok := range found {
		if ok {
			res.Keys[n], recs[n] = res.Keys[i], recs[i]
			n++
		}
	}
	res.Keys, recs = res.Keys[:n], recs[:n]
	return res, recs, avro, nil
}

// QueryAll runs a secondary-index query over every document group of table
// in this partition; Keys of the result are full encoded document keys.
func (r *Replica) QueryAll(table string, op index.Op, o index.Options) (index.Result, error) {
	return index.ExecuteAll(r.engine, r.prefix, table, op, o)
}
