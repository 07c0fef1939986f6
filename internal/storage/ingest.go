package storage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/objstorage"
	"github.com/cockroachdb/pebble/v2/objstorage/objstorageprovider"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// SSTWriter builds an sstable for Ingest. Points (sets and deletions) are
// added in strictly increasing key order; range deletions are
// non-overlapping and in order.
// A range deletion does not delete the points of its own table: ingested,
// they all take one sequence number, and a deletion only hides older keys.
type SSTWriter struct {
	w *sstable.Writer
}

// NewSSTWriter returns a writer of an sstable, in the format this store
// ingests, to out (see FileWritable for a file).
func (e *Engine) NewSSTWriter(out objstorage.Writable) *SSTWriter {
	return &SSTWriter{w: sstable.NewWriter(out, e.opts.MakeWriterOptions(0, e.db.TableFormat()))}
}

// Set adds a point.
func (w *SSTWriter) Set(key, value []byte) error { return w.w.Set(key, value) }

// Delete adds a point deletion: ingested, it hides the key's older value.
func (w *SSTWriter) Delete(key []byte) error { return w.w.Delete(key) }

// DeleteRange adds a deletion of [start, end).
func (w *SSTWriter) DeleteRange(start, end []byte) error { return w.w.DeleteRange(start, end) }

// Close finishes the table (Finish on its Writable).
func (w *SSTWriter) Close() error { return w.w.Close() }

// FileWritable creates the file path for an sstable; Finish syncs it.
func FileWritable(path string) (objstorage.Writable, error) {
	f, err := coalescingFS{vfs.Default}.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, err
	}
	return objstorageprovider.NewFileWritable(f), nil
}

// Ingest adds the sstables at paths to the store atomically: after a crash
// either all of them are in or none is. Their key ranges must not overlap
// one another. The files are moved (or copied) in, and removed on success.
// An ingestion can replace whatever was tailed (a snapshot replaces a
// partition's change log), so every waiter on Changed wakes.
func (e *Engine) Ingest(ctx context.Context, paths []string) error {
	if e.rows != nil {
		e.rows.begin(nil, true)
	}
	err := e.db.Ingest(ctx, paths)
	if e.rows != nil {
		e.rows.end(nil, true, 0, 0, false)
	}
	if err != nil {
		return err
	}
	e.mu.Lock()
	for t, ch := range e.waiters {
		close(ch)
		delete(e.waiters, t)
	}
	e.mu.Unlock()
	return nil
}

// IngestBatch applies b, uncommitted, by ingestion instead of through the
// WAL and memtable: its writes (sets and point deletions; of two writes of
// a key the later) go into sstables, a new one wherever section(key)
// changes, ingested at once under the staging directory name. Every batch
// committed before is made durable first: an ingested table is durable
// on its own, and must not survive a crash without them (a Raft apply
// committed without a sync). b is released; it holds no range deletions.
func (e *Engine) IngestBatch(ctx context.Context, b *Batch, name string, section func(key []byte) int) error {
	defer b.Close()
	type write struct {
		key, value []byte
		del        bool
	}
	var ws []write
	r := b.b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			ws = append(ws, write{key: key, value: value})
		case pebble.InternalKeyKindDelete:
			ws = append(ws, write{key: key, del: true})
		default:
			return fmt.Errorf("a batch ingested holds only sets and point deletions, not %s", kind)
		}
	}
	if len(ws) == 0 {
		return nil
	}
	slices.SortStableFunc(ws, func(a, b write) int { return bytes.Compare(a.key, b.key) })
	dir, err := e.StagingDir(name)
	if err != nil {
		return err
	}
	var paths []string
	var w *SSTWriter
	cur := 0
	for i, x := range ws {
		if i+1 < len(ws) && bytes.Equal(x.key, ws[i+1].key) {
			continue // written again later in the batch
		}
		if s := section(x.key); w == nil || s != cur {
			if w != nil {
				if err := w.Close(); err != nil {
					return err
				}
			}
			path := filepath.Join(dir, fmt.Sprintf("%d.sst", len(paths)))
			out, err := FileWritable(path)
			if err != nil {
				return err
			}
			w, cur, paths = e.NewSSTWriter(out), s, append(paths, path)
		}
		if x.del {
			err = w.Delete(x.key)
		} else {
			err = w.Set(x.key, x.value)
		}
		if err != nil {
			w.Close()
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := e.db.LogData(nil, pebble.Sync); err != nil {
		return err
	}
	return e.Ingest(ctx, paths)
}

// StagingDir returns an empty directory next to the store (on the same
// file system, so Ingest can link files from it) for files about to be
// ingested; name tells apart the users. What a crash left there is gone.
func (e *Engine) StagingDir(name string) (string, error) {
	dir := filepath.Join(e.dir+".staging", name)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear staging directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("staging directory: %w", err)
	}
	return dir, nil
}
