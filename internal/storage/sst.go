package storage

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// WriteSpanTables writes the keys of [start, end) that it reads as
// sstables of about tableBytes of keys and values each, every table to a
// Writable from next, each with a range deletion over its part of the
// span: the tables tile the span, so ingesting (or replaying) them replaces
// the span whole. It reports the number of tables written.
func WriteSpanTables(e *Engine, it *Iter, start, end []byte, tableBytes int, next func() (objstorage.Writable, error)) (int, error) {
	from := start
	out, err := next()
	if err != nil {
		return 0, err
	}
	w := e.NewSSTWriter(out)
	tables, size := 1, 0
	for ok := it.SeekGE(start); ok && bytes.Compare(it.Key(), end) < 0; ok = it.Next() {
		k := it.Key()
		if size >= tableBytes {
			nextFrom := bytes.Clone(k)
			if err := w.DeleteRange(from, nextFrom); err != nil {
				return tables, err
			}
			if err := w.Close(); err != nil {
				return tables, err
			}
			from, size = nextFrom, 0
			if out, err = next(); err != nil {
				return tables, err
			}
			w = e.NewSSTWriter(out)
			tables++
		}
		if err := w.Set(k, it.Value()); err != nil {
			return tables, err
		}
		size += len(k) + len(it.Value())
	}
	if err := it.Error(); err != nil {
		return tables, err
	}
	if err := w.DeleteRange(from, end); err != nil {
		return tables, err
	}
	return tables, w.Close()
}

// SSTVisitor receives the contents of an sstable: every range deletion and
// every point, each kind in key order. The slices are valid only during
// the call.
type SSTVisitor struct {
	RangeDelete func(start, end []byte) error
	Set         func(key, value []byte) error
}

// ReadSST reads the sstable at path (one written by an SSTWriter: points
// set and ranges deleted, nothing else; any other kind of key is an error)
// into v: range deletions first, then points.
func (e *Engine) ReadSST(path string, v SSTVisitor) error {
	f, err := vfs.Default.Open(path)
	if err != nil {
		return err
	}
	readable, err := sstable.NewSimpleReadable(f)
	if err != nil {
		f.Close()
		return err
	}
	r, err := sstable.NewReader(context.Background(), readable, e.opts.MakeReaderOptions())
	if err != nil {
		readable.Close()
		return fmt.Errorf("not an sstable: %w", err)
	}
	defer r.Close()
	dels, err := r.NewRawRangeDelIter(context.Background(), sstable.NoFragmentTransforms, sstable.NoReadEnv)
	if err != nil {
		return err
	}
	if dels != nil {
		defer dels.Close()
		s, err := dels.First()
		for ; err == nil && s != nil; s, err = dels.Next() {
			if err := v.RangeDelete(s.Start, s.End); err != nil {
				return err
			}
		}
		if err != nil {
			return err
		}
	}
	points, err := r.NewIter(sstable.NoTransforms, nil, nil, sstable.AssertNoBlobHandles)
	if err != nil {
		return err
	}
	defer points.Close()
	for kv := points.First(); kv != nil; kv = points.Next() {
		if kv.K.Kind() != pebble.InternalKeyKindSet {
			return fmt.Errorf("sstable holds a key of kind %s; only sets and range deletions are expected", kv.K.Kind())
		}
		val, _, err := kv.Value(nil)
		if err != nil {
			return err
		}
		if err := v.Set(kv.K.UserKey, val); err != nil {
			return err
		}
	}
	return points.Error()
}
