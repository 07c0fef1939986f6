package partition

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/doppio-db/doppio/internal/index"
	"github.com/doppio-db/doppio/internal/storage"
)

// Folding. The write path writes a document's text index entries in the
// pending form (index.Diff): one entry per document and text field instead
// of one per term. Once a document group's writes have added foldAfter of
// them, a job on the leader folds the group's pending entries into a
// segment (index.FoldSegment: a posting block per term, a folded entry per
// document) with the documents it folds latched, so no write of theirs
// falls between what the fold reads and what it writes. A group is folded
// again each time its writes have added foldAfter more: a segment costs a
// key per distinct term of its documents, so what a large mailbox's text
// costs to write follows its folds, not its words. A write of bulkDocs
// documents or more (a bulk load's transaction) writes its text as a
// segment of its own, in the same write set. A fold changes
// no query's answer; it is replicated like any write set (marked Upkeep, so
// an incremental backup knows it changed nothing) and consumes an SCN with
// an empty change-log entry. A query that reads more than twice foldAfter
// pending entries in one list asks for a fold too: the counts are the
// leader's, in memory, and a new leader starts afresh.

// foldAfter is how many pending entries a document group's writes add
// before the group is folded (TestingKnobs.FoldAfter replaces it).
const foldAfter = 256

// A fold writes at most foldDocs documents per write set, as one segment.
const foldDocs = 256

// A group's fold job purges a text list's dead postings once it has
// purgeAfter of them (TestingKnobs.PurgeAfter replaces it), rewriting the
// posting blocks in write sets of about purgeBytes. A query that reads as
// many in one list starts the job.
const purgeAfter = 256

const purgeBytes = 256 << 10

// A write of bulkDocs documents or more writes their text entries as a
// segment of their own instead of pending.
const bulkDocs = 64

// maxFoldCounts bounds the groups whose count is kept: past it, the counts
// start again (the groups left behind are folded when queries find their
// pending entries piled up, or after foldAfter more writes).
const maxFoldCounts = 1 << 16

type folding struct {
	// after and purgeAfter are foldAfter and purgeAfter, or the knobs'
	// values; beforeWrite is the knobs' BeforeFoldWrite.
	after, purgeAfter int
	beforeWrite       func()

	mu      sync.Mutex
	counts  map[string]int  // table "\x00" group -> pending entries written since
	running map[string]bool // folds at work; true: asked for again meanwhile
	// active holds the groups a Fold is at work on, closed when it ends:
	// one Fold of a group at a time, whoever calls it, since a purge
	// rewrites posting blocks from what it read (index.PurgeDead) and two
	// at once would put back postings the other dropped.
	active map[string]chan struct{}
	// drop: a fold holds it shared from before it reads which indexes are
	// text until its write is applied; dropping an index takes it
	// exclusively once its build is gone, so no fold writes entries of an
	// index after its removal began.
	drop sync.RWMutex
	// writes and docs count the fold write sets and the documents folded,
	// purged the dead postings purged.
	writes, docs, purged atomic.Int64
}

// configure sets the thresholds and the hook from k (nil: production's).
func (f *folding) configure(k *TestingKnobs) {
	f.after, f.purgeAfter = foldAfter, purgeAfter
	if k != nil {
		if k.FoldAfter > 0 {
			f.after = k.FoldAfter
		}
		if k.PurgeAfter > 0 {
			f.purgeAfter = k.PurgeAfter
		}
		f.beforeWrite = k.BeforeFoldWrite
	}
}

// FoldStats returns how many write sets folded pending text entries on
// this replica (as leader), how many documents' entries they folded, and
// how many dead postings its purges dropped.
func (r *Replica) FoldStats() (writeSets, documents, purged int64) {
	return r.folds.writes.Load(), r.folds.docs.Load(), r.folds.purged.Load()
}

// notePending counts n pending entries written to group of table, and
// starts a fold of the group once they reach foldAfter.
func (r *Replica) notePending(table string, group []byte, n int) {
	if n == 0 {
		return
	}
	k := table + "\x00" + string(group)
	f := &r.folds
	f.mu.Lock()
	if f.counts == nil || len(f.counts) >= maxFoldCounts {
		f.counts = map[string]int{}
	}
	f.counts[k] += n
	due := f.counts[k] >= f.after
	if due {
		delete(f.counts, k)
	}
	f.mu.Unlock()
	if due {
		r.startFold(table, group)
	}
}

// startFold folds group of table in the background; when a fold of it is
// at work, that one goes over the group once more when it ends.
func (r *Replica) startFold(table string, group []byte) {
	k := table + "\x00" + string(group)
	f := &r.folds
	f.mu.Lock()
	if f.running == nil {
		f.running = map[string]bool{}
	}
	_, busy := f.running[k]
	f.running[k] = busy // asked again, if busy
	f.mu.Unlock()
	if busy {
		return
	}
	group = append([]byte(nil), group...)
	r.spawn(func() {
		for {
			ctx, cancel := context.WithTimeout(r.jobContext(), 10*time.Second)
			// A failure (leadership lost, shutting down) leaves the
			// entries pending, where queries read them: the next fold
			// takes them.
			err := r.Fold(ctx, table, group)
			cancel()
			f.mu.Lock()
			again := f.running[k] && err == nil
			if !again {
				delete(f.running, k)
			} else {
				f.running[k] = false
			}
			f.mu.Unlock()
			if !again {
				return
			}
		}
	})
}

// Fold folds the pending text entries of the document group group of
// table into segments, foldDocs documents per write set, until none is
// left. It runs on the leader only; a replica that does not lead
// returns its Lead error. It latches only the documents it folds, so the
// group's other writes go on meanwhile; a second Fold of the same group
// waits for the first.
func (r *Replica) Fold(ctx context.Context, table string, group []byte) error {
	if err := r.repl.Lead(ctx); err != nil {
		return err
	}
	if err := r.refuseWhileRestoring(); err != nil {
		return err
	}
	leave, err := r.folds.enter(ctx, table+"\x00"+string(group))
	if err != nil {
		return err
	}
	defer leave()
	r.folds.drop.RLock()
	defer r.folds.drop.RUnlock()
	fields := r.textFields(table)
	if len(fields) == 0 {
		return nil
	}
	for {
		more, err := r.foldChunk(ctx, table, group, fields)
		if err != nil {
			return err
		}
		if !more {
			break
		}
	}
	for _, field := range fields {
		if err := r.purge(ctx, r.prefix.Index(table, group, field)); err != nil {
			return err
		}
	}
	return nil
}

// enter waits until no Fold of the group k (table "\x00" group) is at
// work, then marks one at work until leave is called, or fails when ctx
// ends first.
func (f *folding) enter(ctx context.Context, k string) (leave func(), err error) {
	for {
		f.mu.Lock()
		if f.active == nil {
			f.active = map[string]chan struct{}{}
		}
		busy, ok := f.active[k]
		if !ok {
			done := make(chan struct{})
			f.active[k] = done
			f.mu.Unlock()
			return func() {
				f.mu.Lock()
				delete(f.active, k)
				f.mu.Unlock()
				close(done)
			}, nil
		}
		f.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// purge drops the dead postings of the text list starting at list from
// its posting blocks, once there are purgeAfter of them (index.PurgeDead),
// in write sets of about purgeBytes. It runs in the group's fold job, so
// one list is not purged twice at once.
func (r *Replica) purge(ctx context.Context, list []byte) error {
	batches, deletes, purged, err := index.PurgeDead(r.engine, list, r.folds.purgeAfter, purgeBytes)
	if err != nil {
		return err
	}
	for i, puts := range batches {
		ws := &WriteSet{Mtime: time.Now().UnixMilli(), Upkeep: true, Index: IndexWrites{Deletes: deletes[i]}}
		for _, e := range puts {
			ws.Index.Puts = append(ws.Index.Puts, IndexEntry{Key: e.Key, Value: e.Value})
		}
		if _, err := r.repl.Replicate(ctx, ws); err != nil {
			return err
		}
	}
	r.folds.purged.Add(int64(purged))
	return nil
}

// foldChunk folds the first foldDocs pending entries of group.
func (r *Replica) foldChunk(ctx context.Context, table string, group []byte, fields []string) (more bool, err error) {
	// Which entries are pending is read unlatched, then each is read
	// again with its document latched: a write between the two is seen.
	refs, more, err := index.PendingKeys(r.engine, r.prefix, table, group, fields, foldDocs)
	if err != nil || len(refs) == 0 {
		return false, err
	}
	docs := make([]string, len(refs))
	for i, ref := range refs {
		docs[i] = string(r.prefix.Document(table, append(slices.Clip(group), ref.Rest()...)))
	}
	release, err := r.latch.acquireDocs(ctx, string(group), docs)
	if err != nil {
		return false, err
	}
	held := true
	defer func() {
		if held {
			release()
		}
	}()
	ws := &WriteSet{Mtime: time.Now().UnixMilli(), Upkeep: true}
	values := make([][]byte, len(refs))
	for i, ref := range refs {
		v, err := r.engine.GetShared(ref.Key)
		if errors.Is(err, storage.ErrNotFound) {
			continue // the document was written since: deleted, or folded
		}
		if err != nil {
			return false, err
		}
		values[i] = v
		ws.Index.Deletes = append(ws.Index.Deletes, ref.Key)
	}
	if len(ws.Index.Deletes) == 0 {
		return more, nil
	}
	// A segment id new to the group's lists: random, so two folds of a
	// group (an old leader's still in flight, a new leader's) never share
	// one.
	entries, err := index.FoldSegment(rand.Uint64(), refs, values)
	if err != nil {
		return false, err
	}
	ws.Index.Puts = slices.Grow(ws.Index.Puts, len(entries))
	for _, e := range entries {
		ws.Index.Puts = append(ws.Index.Puts, IndexEntry{Key: e.Key, Value: e.Value})
	}
	if r.folds.beforeWrite != nil {
		r.folds.beforeWrite()
	}
	if _, err := r.repl.Replicate(ctx, ws); err != nil {
		held = !releaseWhenSettled(err, release)
		return false, err
	}
	r.folds.writes.Add(1)
	r.folds.docs.Add(int64(len(ws.Index.Deletes)))
	return more, nil
}

// textFields returns the fields of table this partition indexes as text.
func (r *Replica) textFields(table string) []string {
	r.idx.mu.Lock()
	defer r.idx.mu.Unlock()
	var out []string
	for key, b := range r.idx.builds {
		t, path, _ := strings.Cut(key, "\x00")
		if t == table && strings.HasPrefix(b.sig, "text/") {
			out = append(out, path)
		}
	}
	return out
}

// foldIfPiled starts a fold of group when a query read more pending
// entries or dead postings in one of its lists than the job should leave.
func (r *Replica) foldIfPiled(table string, group []byte, res index.Result) {
	if res.Pending > 2*r.folds.after || res.Dead >= r.folds.purgeAfter {
		r.startFold(table, group)
	}
}

// readKey reads a key of the partition for index.Diff: its value (shared:
// not to be modified), or nil when it is absent.
func (r *Replica) readKey(key []byte) ([]byte, error) {
	v, err := r.engine.GetShared(key)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	return v, err
}
