package datastream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/changes"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/schema"
)

// A "from":"snapshot" task first delivers every document of its tables
// as of one SCN, then the change log after that SCN. The snapshot is
// delivered in chunks; after each acknowledged chunk the task records,
// fenced like a checkpoint, the snapshot's SCN and the last document
// delivered (the cursor). The documents up to the cursor are then known
// to the sink as of that SCN, the others not at all.
//
// A new owner (the old one died, or the task moved) cannot open a view at
// that SCN: its replica has moved on to a later one, N. It first delivers
// the change log from the recorded SCN to N, keeping only the events of
// documents up to the cursor (the others will come in the snapshot as of
// N), then goes on with the snapshot after the cursor as of N. Every
// document thus arrives once in the snapshot, as of some SCN, and then
// every change after that SCN: no gap, no duplicate. Record positions
// stay monotonic for the consumers' deduplication rule: the catch-up's
// SCNs lie between the two snapshot SCNs, and the snapshot records at N
// take transaction indexes after the catch-up's events at N.

// snapshotChunk is the documents produced per round of a snapshot.
const snapshotChunk = 256

// SnapshotState is a snapshot's progress, stored in the task record.
// Tasks replace it, never change it in place.
type SnapshotState struct {
	// SCN of the view the documents up to the cursor were read from, and
	// the change log's position for them.
	SCN partition.SCN `json:"-"`
	// Tables are the tables snapshotted, in the order delivered.
	Tables []string `json:"tables"`
	// The cursor: the last document delivered, by its table's index in
	// Tables and its encoded key; Key nil: none yet.
	Table int    `json:"table"`
	Key   []byte `json:"key,omitempty"`
	// Index is the transaction index of the next snapshot record at SCN.
	Index int `json:"index"`
	// Documents counts the snapshot records delivered.
	Documents uint64 `json:"documents"`
}

// MarshalJSON writes the SCN as "g:s".
func (s SnapshotState) MarshalJSON() ([]byte, error) {
	type plain SnapshotState
	return json.Marshal(struct {
		SCN string `json:"scn"`
		plain
	}{s.SCN.String(), plain(s)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *SnapshotState) UnmarshalJSON(b []byte) error {
	type plain SnapshotState
	var v struct {
		SCN string `json:"scn"`
		plain
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	scn, err := partition.ParseSCN(v.SCN)
	if err != nil {
		return err
	}
	*s = SnapshotState(v.plain)
	s.SCN = scn
	return nil
}

// covers reports whether the document (table, key) was delivered up to
// the cursor, so its changes after SCN belong in the stream. Tables the
// snapshot does not hold (created since) are wholly in the log.
func (s *SnapshotState) covers(table string, key []byte) bool {
	i := slices.Index(s.Tables, table)
	if i < 0 {
		return true
	}
	return i < s.Table || i == s.Table && s.Key != nil && bytes.Compare(key, s.Key) <= 0
}

// errSnapshotBehind says the replica has not yet applied the snapshot's
// SCN: the task waits for it.
var errSnapshotBehind = errors.New("the replica on this node is behind the snapshot's position")

// errSnapshotPaused ends a snapshot round when a user paused the task.
var errSnapshotPaused = errors.New("paused")

// bootstrap runs a "from":"snapshot" task's snapshot to its end, resuming
// from the task record's progress; on success the task is started at the
// snapshot's SCN.
func (t *task) bootstrap(l changes.Log, s sink, filter changes.Filter, resolve func(string) (*schema.Table, error)) error {
	sn, ok := l.(snapshotter)
	if !ok {
		return fmt.Errorf("the replica of partition %d cannot open a snapshot", t.id.Partition)
	}
	sink, ok := s.(*kafkaSink)
	if !ok {
		return fmt.Errorf("a snapshot start is delivered to a Kafka sink only")
	}
	t.mu.Lock()
	st := t.rec.Snapshot
	t.mu.Unlock()
	fresh := st == nil
	if fresh {
		st = &SnapshotState{Tables: t.def.Tables}
		if len(st.Tables) == 0 {
			for _, tb := range t.m.schemas.Tables(t.id.DB) {
				st.Tables = append(st.Tables, tb.Def.Name)
			}
		}
	} else if l.Applied().Sequence < st.SCN.Sequence {
		return errSnapshotBehind
	}
	view, err := sn.Snapshot()
	if err != nil {
		return err
	}
	defer view.Close()
	if fresh {
		st.SCN = view.SCN
		t.m.log.Info("datastream snapshot starts", "datastream", t.id.Stream, "partition", t.id.Partition, "scn", view.SCN.String())
		if err := t.saveSnapshot(st, 0); err != nil {
			return err
		}
	} else if view.SCN.Sequence > st.SCN.Sequence {
		if st, err = t.catchUp(l, st, view.SCN, sink, filter, resolve); err != nil {
			return err
		}
	}
	var chunk []changes.Event
	size, paced := snapshotChunk, time.Now()
	if r := t.def.SnapshotRate; r > 0 && r < size {
		size = r
	}
	send := func(end bool) error {
		n := len(chunk)
		if !end {
			n-- // held back: the last document is marked when known
		}
		if n <= 0 {
			return nil
		}
		if end {
			chunk[n-1].TxnEnd = true
		}
		if rec, ok := t.m.record(t.id.Stream); !ok || rec.PartitionPaused(t.id.Partition) {
			return errSnapshotPaused
		}
		recs, err := records(&t.def, chunk[:n], resolve, st.Index)
		if err == nil {
			err = sink.produce(t.ctx, recs)
		}
		if err != nil {
			return err
		}
		next := *st
		next.Table, next.Key = slices.Index(st.Tables, chunk[n-1].Table), chunk[n-1].Key
		next.Index += n
		next.Documents += uint64(n)
		st = &next
		if err := t.saveSnapshot(st, n); err != nil {
			return err
		}
		chunk = append(chunk[:0], chunk[n:]...)
		if r := t.def.SnapshotRate; r > 0 {
			paced = paced.Add(time.Duration(n) * time.Second / time.Duration(r))
			if !t.sleep(time.Until(paced)) {
				return t.ctx.Err()
			}
		}
		return nil
	}
	for ti := st.Table; ti < len(st.Tables); ti++ {
		table := st.Tables[ti]
		if _, err := resolve(table); err != nil {
			continue // dropped since the snapshot began
		}
		err := view.Documents(table, func(key []byte, rec partition.Record) error {
			if filter.Tables != nil && !filter.Tables[table] {
				return nil
			}
			if st.covers(table, key) {
				return nil
			}
			if len(chunk) > size {
				if err := send(false); err != nil {
					return err
				}
			}
			chunk = append(chunk, changes.Event{Partition: t.id.Partition, SCN: st.SCN, Mtime: rec.Mtime, Snapshot: true,
				Write: partition.Write{Table: table, Key: bytes.Clone(key), Op: partition.OpInsert, AfterVersion: rec.Version, After: bytes.Clone(rec.Avro)}})
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := send(true); err != nil {
		return err
	}
	t.mu.Lock()
	t.rec.SCN, t.rec.Started, t.rec.Snapshot = st.SCN, true, nil
	t.mu.Unlock()
	if err := t.m.flush(t.ctx, []*task{t}); err != nil {
		return err
	}
	t.m.log.Info("datastream snapshot done", "datastream", t.id.Stream, "partition", t.id.Partition, "scn", st.SCN.String(), "documents", st.Documents)
	return t.ctx.Err()
}

// catchUp delivers the change log after st.SCN up to and including to,
// keeping only the events of documents the snapshot delivered (up to its
// cursor), and returns the progress moved to to.
func (t *task) catchUp(l changes.Log, st *SnapshotState, to partition.SCN, sink *kafkaSink, filter changes.Filter, resolve func(string) (*schema.Table, error)) (*SnapshotState, error) {
	rd, err := changes.NewReader(l, changes.Position{Partition: t.id.Partition, SCN: st.SCN}, filter)
	if err != nil {
		return nil, err
	}
	rd.Batch = readBatch
	for st.SCN.Sequence < to.Sequence {
		evs, err := rd.Next(t.ctx, pollEvery)
		if err != nil {
			return nil, err
		}
		at := rd.Position().SCN
		var kept []changes.Event
		for i := range evs {
			ev := evs[i]
			if ev.SCN.Sequence > to.Sequence {
				at = to
				break
			}
			if !st.covers(ev.Table, ev.Key) {
				if ev.TxnEnd && len(kept) > 0 && kept[len(kept)-1].SCN == ev.SCN {
					kept[len(kept)-1].TxnEnd = true
				}
				continue
			}
			kept = append(kept, ev)
		}
		if at.Sequence > to.Sequence {
			at = to
		}
		if len(kept) > 0 {
			recs, err := records(&t.def, kept, resolve, 0)
			if err == nil {
				err = sink.produce(t.ctx, recs)
			}
			if err != nil {
				return nil, err
			}
		}
		next := *st
		next.SCN, next.Index = at, 0
		// The snapshot's records at the same SCN come after these events.
		for i := len(kept) - 1; i >= 0 && kept[i].SCN.Sequence == at.Sequence; i-- {
			next.Index++
		}
		st = &next
		if err := t.saveSnapshot(st, len(kept)); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// saveSnapshot records the snapshot's progress after n records were
// acknowledged, and writes it before anything more is produced.
func (t *task) saveSnapshot(st *SnapshotState, n int) error {
	t.mu.Lock()
	t.rec.Snapshot = st
	if n > 0 {
		t.rec.Failures = 0
	}
	t.delivered += uint64(n)
	t.mu.Unlock()
	t.m.metrics.produced.WithLabelValues(t.id.Stream).Add(float64(n))
	if err := t.m.flush(t.ctx, []*task{t}); err != nil {
		return err
	}
	return t.ctx.Err()
}
