package bulkload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/bulk"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
)

// Mark is how far a partition has applied a load, as recorded in the
// partition's replicated state: Offset is the record boundary in the
// load's file where the next chunk starts, Records how many records
// precede it, Done that the whole file is applied.
type Mark struct {
	Load            string
	Offset, Records uint64
	Done            bool
}

// Doc is one loaded document: its encoded key and Avro body.
type Doc = bulk.Record

// Partition is the load's side of a partition replica this node leads.
type Partition interface {
	// LoadChunk applies docs as one write set if the partition's mark for
	// the load is from, recording to; a partition at another mark answers
	// a problem.Conflict and applies nothing.
	LoadChunk(ctx context.Context, table string, version uint32, from, to Mark, docs []Doc) (partition.SCN, error)
	// ReplaceChunk is LoadChunk for a replace load: the documents are
	// staged, and the chunk to a done mark, which carries none, swaps
	// them in for the table's (partition.Replica.ReplaceChunk).
	ReplaceChunk(ctx context.Context, table string, version uint32, from, to Mark, docs []Doc) (partition.SCN, error)
	// LoadMark returns the partition's mark for load (zero: not started).
	LoadMark(load string) (Mark, error)
	// DiscardStaging deletes what a replace load into table staged in the
	// partition and resets its mark to the start, if the mark is still
	// from (a problem.Conflict otherwise; partition.Replica.DiscardStaging).
	DiscardStaging(ctx context.Context, table string, from Mark) error
}

// Replicas finds the partitions this node leads.
type Replicas interface {
	// Leading returns this node's replica of partition p of db when this
	// node leads it.
	Leading(db string, p int) (Partition, bool)
}

// errMoved ends a driver whose partition is no longer led here: the
// new leader's driver goes on from the partition's mark.
var errMoved = errors.New("partition leadership moved")

// drive starts a driver for each partition of l that this node leads and
// that has work left.
func (m *Manager) drive(ctx context.Context, l loaded) {
	now := time.Now()
	for _, f := range l.rec.Files {
		pr := current(l.rec, l.progress, f.Partition)
		if !needsDriver(l.rec, pr) {
			continue
		}
		rep, ok := m.cfg.Replicas.Leading(l.rec.Database, f.Partition)
		if !ok {
			continue
		}
		k := partKey{l.rec.ID, l.rec.Run, f.Partition}
		m.mu.Lock()
		busy := m.running[k] || now.Before(m.retryAt[k])
		if !busy {
			m.running[k] = true
			delete(m.cleaned, l.rec.ID)
		}
		m.mu.Unlock()
		if busy {
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := m.runPartition(ctx, l, f, pr, rep)
			m.mu.Lock()
			delete(m.running, k)
			if err != nil && !errors.Is(err, errMoved) && ctx.Err() == nil {
				m.retryAt[k] = time.Now().Add(5 * time.Second)
			}
			m.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("bulk load: partition", "id", l.rec.ID, "db", l.rec.Database, "partition", f.Partition, "err", err)
			}
		}()
	}
}

// needsDriver reports whether a partition in progress pr has work this
// node would do if it led the partition.
func needsDriver(rec Record, pr Progress) bool {
	switch rec.State {
	case wire.LoadVerifying:
		return pr.State == wire.PartPending && !rec.Cancelled
	case wire.LoadLoading:
		if rec.Cancelled && !pr.started() {
			return false
		}
		return pr.State == wire.PartPending || pr.State == wire.PartVerified || pr.State == wire.PartLoading
	}
	return false
}

// runPartition does the partition's next step: verify its file, or load
// it from the partition's mark to its end.
func (m *Manager) runPartition(ctx context.Context, l loaded, f bulk.File, pr Progress, rep Partition) error {
	select {
	case m.sema <- struct{}{}:
		defer func() { <-m.sema }()
	case <-ctx.Done():
		return ctx.Err()
	}
	rec := l.rec
	mark, err := rep.LoadMark(rec.ID)
	if err != nil {
		return err
	}
	if mark.Done {
		_, err := m.putProgress(ctx, rec, 0, f.Partition, Progress{State: wire.PartDone, Bytes: uint64(f.Bytes), Records: mark.Records})
		return err
	}
	path, err := m.stage(ctx, rec, f)
	if err != nil {
		if refused(err) && (!pr.started() || rec.Mode == ModeReplace) {
			// Nothing of this partition is applied (a replace's staging is
			// deleted once the load ends): the partition fails, and the load.
			_, perr := m.putProgress(ctx, rec, 0, f.Partition, Progress{State: wire.PartFailed, Error: err.Error()})
			return errors.Join(err, perr)
		}
		_, _ = m.putProgress(ctx, rec, 0, f.Partition, Progress{State: pr.State, Bytes: pr.Bytes, Records: pr.Records, Error: err.Error()})
		return err
	}
	if rec.State == wire.LoadVerifying {
		_, err := m.putProgress(ctx, rec, 0, f.Partition, Progress{State: wire.PartVerified})
		return err
	}
	if !pr.started() {
		// Conditional on the record as read: a cancel since then wins.
		ok, err := m.putProgress(ctx, rec, l.rev, f.Partition, Progress{State: wire.PartLoading, Bytes: mark.Offset, Records: mark.Records})
		if err != nil || !ok {
			return err
		}
	}
	err = m.apply(ctx, rec, f, path, mark, rep)
	if errors.Is(err, bulk.ErrCorrupt) {
		// The file changed since it was verified: the next attempt
		// verifies it again, and refuses it.
		m.mu.Lock()
		delete(m.verified, partKey{rec.ID, 0, f.Partition})
		m.mu.Unlock()
	}
	return err
}

// stage fetches and verifies partition file f, once per process: over
// http, a copy that fails verification is fetched again once before the
// file is refused.
func (m *Manager) stage(ctx context.Context, rec Record, f bulk.File) (string, error) {
	k := partKey{rec.ID, 0, f.Partition}
	m.mu.Lock()
	path, ok := m.verified[k]
	m.mu.Unlock()
	if ok {
		return path, nil
	}
	src, err := parseSource(rec.Source, m.cfg.HTTP)
	if err != nil {
		return "", err
	}
	for attempt := 0; ; attempt++ {
		path, err = src.fetch(ctx, f, m.stagingDir(rec.ID))
		if err != nil {
			return "", err
		}
		err = verify(path, f)
		if err == nil {
			break
		}
		if src.base == nil || attempt > 0 || !refused(err) {
			return "", err
		}
		_ = os.Remove(path)
	}
	m.mu.Lock()
	m.verified[k] = path
	m.mu.Unlock()
	return path, nil
}

// apply reads the verified file from the partition's mark and applies it
// in chunks, each moving the mark, until the file's end.
func (m *Manager) apply(ctx context.Context, rec Record, f bulk.File, path string, mark Mark, rep Partition) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := bulk.NewReader(bufio.NewReaderSize(fh, 1<<20))
	// Skip what is applied, reading rather than seeking, so the key order
	// is checked from the file's start.
	for uint64(r.Position().Offset) < mark.Offset {
		if _, err := r.Next(); err != nil {
			return fmt.Errorf("partition %d: no record boundary at the mark's offset %d: %w", f.Partition, mark.Offset, err)
		}
	}
	if pos := r.Position(); uint64(pos.Offset) != mark.Offset || uint64(pos.Records) != mark.Records {
		return fmt.Errorf("partition %d: the mark (offset %d, %d records) is not a record boundary of the file", f.Partition, mark.Offset, mark.Records)
	}
	lim := m.loadLimiter(rec)
	chunk := rep.LoadChunk
	if rec.Mode == ModeReplace {
		chunk = rep.ReplaceChunk
	}
	lastReport := time.Now()
	for {
		var docs []Doc
		size, eof := 0, false
		for size < m.cfg.ChunkBytes {
			d, err := r.Next()
			if errors.Is(err, io.EOF) {
				eof = true
				break
			}
			if err != nil {
				return err
			}
			docs = append(docs, d)
			size += len(d.Key) + len(d.Doc)
		}
		pos := r.Position()
		to := Mark{Load: rec.ID, Offset: uint64(pos.Offset), Records: uint64(pos.Records), Done: eof}
		if eof {
			to.Offset = uint64(f.Bytes)
		}
		if eof && len(docs) > 0 && rec.Mode == ModeReplace {
			// The swap, a chunk of its own with no documents, follows.
			to.Offset, to.Done = uint64(pos.Offset), false
		}
		if err := m.node.wait(ctx, size); err != nil {
			return err
		}
		if err := lim.wait(ctx, size); err != nil {
			return err
		}
		if _, err := chunk(ctx, rec.target(), uint32(rec.SchemaVersion), mark, to, docs); err != nil {
			if partition.IsNotApplied(err) {
				return errMoved
			}
			if problem.Is(err, problem.Conflict) {
				return fmt.Errorf("partition %d moved past mark %d by another driver: %w", f.Partition, mark.Offset, err)
			}
			return err
		}
		m.metrics.applied(rec.ID, to.Offset-mark.Offset, to.Records-mark.Records)
		mark = to
		if mark.Done {
			_, err := m.putProgress(ctx, rec, 0, f.Partition, Progress{State: wire.PartDone, Bytes: mark.Offset, Records: mark.Records})
			return err
		}
		if time.Since(lastReport) > 500*time.Millisecond {
			lastReport = time.Now()
			if _, err := m.putProgress(ctx, rec, 0, f.Partition, Progress{State: wire.PartLoading, Bytes: mark.Offset, Records: mark.Records}); err != nil {
				return err
			}
		}
	}
}

// discard starts, for each partition this node leads of an ended load
// whose staging may be left (stagingLeft), the deletion of that staging.
func (m *Manager) discard(ctx context.Context, l loaded) {
	for _, f := range l.rec.Files {
		pr := current(l.rec, l.progress, f.Partition)
		if !stagingLeft(l.rec, pr) {
			continue
		}
		rep, ok := m.cfg.Replicas.Leading(l.rec.Database, f.Partition)
		if !ok {
			continue
		}
		k := partKey{l.rec.ID, l.rec.Run, f.Partition}
		m.mu.Lock()
		busy := m.discarding[k]
		m.discarding[k] = true
		m.mu.Unlock()
		if busy {
			continue
		}
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			err := m.discardPartition(ctx, l, f.Partition, pr, rep)
			m.mu.Lock()
			delete(m.discarding, k)
			m.mu.Unlock()
			if err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("bulk load: discard the staging", "id", l.rec.ID, "db", l.rec.Database, "partition", f.Partition, "err", err)
			}
		}()
	}
}

// discardPartition deletes partition p's staging from the mark it
// records, reporting it in the partition's progress. Every progress write
// is conditional on the load's record as read: once the load is started
// again its run owns the partition, and a deletion already proposed is
// applied only if no chunk of the new run moved the mark first.
func (m *Manager) discardPartition(ctx context.Context, l loaded, p int, pr Progress, rep Partition) error {
	mark, err := rep.LoadMark(l.rec.ID)
	if err != nil {
		return err
	}
	if mark.Offset == 0 || mark.Done {
		pr.Staging = stagingNone
		_, err := m.putProgress(ctx, l.rec, l.rev, p, pr)
		return err
	}
	if pr.Staging != wire.StagingDiscarding {
		pr.Staging = wire.StagingDiscarding
		if ok, err := m.putProgress(ctx, l.rec, l.rev, p, pr); err != nil || !ok {
			return err
		}
	}
	if err := rep.DiscardStaging(ctx, l.rec.target(), mark); err != nil {
		return err
	}
	pr.Staging = wire.StagingDiscarded
	_, err = m.putProgress(ctx, l.rec, l.rev, p, pr)
	return err
}
