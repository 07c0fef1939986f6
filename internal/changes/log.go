package changes

import (
	"context"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// Log is what a reader needs of a partition replica (*partition.Replica).
type Log interface {
	ReadLog(from partition.SCN, limit int) ([]partition.LogEntry, error)
	Commits() <-chan struct{}
	Applied() partition.SCN
}

// Filter selects the events a stream carries.
type Filter struct {
	Tables map[string]bool // nil: every table
}

// match never selects a derived table's version: its chunks are pushed
// data, not changes anyone made (docs/design/derived.md).
func (f Filter) match(table string) bool {
	return !schema.IsVersionTable(table) && (f.Tables == nil || f.Tables[table])
}

// Reader reads one partition's change log from a position, in commit order.
type Reader struct {
	log    Log
	filter Filter
	pos    Position
	// Batch bounds the entries read per call of Next (default 256).
	Batch int
}

// Start is the position of a reader that wants only what commits from now
// on, as far as this replica knows.
func Start(l Log, p int) Position { return Position{Partition: p, SCN: l.Applied()} }

// NewReader returns a reader of l positioned at pos. It fails with a
// problem.Gone error when the log no longer holds what follows pos, or
// holds a different entry at pos (the checkpoint is of another timeline).
// A position beyond what this replica has applied is accepted: the reader
// waits for the replica to catch up.
func NewReader(l Log, pos Position, f Filter) (*Reader, error) {
	r := &Reader{log: l, filter: f, pos: pos, Batch: 256}
	from := partition.SCN{}
	if pos.SCN.Sequence > 0 {
		from = partition.SCN{Generation: pos.SCN.Generation, Sequence: pos.SCN.Sequence - 1}
	}
	ents, err := l.ReadLog(from, 1)
	if err != nil {
		return nil, err
	}
	applied := l.Applied()
	switch {
	case len(ents) == 0 && applied.Sequence <= pos.SCN.Sequence:
		return r, nil // this replica is behind the checkpoint: wait for it
	case len(ents) == 0 && applied.Generation < pos.SCN.Generation,
		len(ents) > 0 && ents[0].SCN.Sequence == pos.SCN.Sequence && ents[0].SCN.Generation != pos.SCN.Generation:
		return nil, problem.New(problem.Gone, "partition %d has no transaction %s: the checkpoint is of another timeline (was the database recreated?); restart the stream with bootstrap=true", pos.Partition, pos.SCN)
	case len(ents) == 0,
		ents[0].SCN.Sequence > pos.SCN.Sequence+1,
		pos.Part > 0 && ents[0].SCN.Sequence != pos.SCN.Sequence:
		return nil, r.trimmed()
	}
	return r, nil
}

func (r *Reader) trimmed() error {
	oldest := "none"
	if ents, err := r.log.ReadLog(partition.SCN{}, 1); err == nil && len(ents) > 0 {
		oldest = ents[0].SCN.String()
	}
	return problem.New(problem.Gone, "partition %d: the change log no longer holds the transactions after %s (the oldest it retains is %s); restart the stream with bootstrap=true", r.pos.Partition, r.pos.SCN, oldest)
}

// Position is where the reader stands: after the last event returned.
func (r *Reader) Position() Position { return r.pos }

// Next returns the events of the next committed transactions (at most
// Batch of them), waiting up to idle for one to commit. It returns no
// events and no error when idle passed without a commit, or when the
// transactions read had no event the filter selects (the position moves
// on regardless). It fails with a problem.Gone error if the log was trimmed
// past the reader's position.
func (r *Reader) Next(ctx context.Context, idle time.Duration) ([]Event, error) {
	var timer *time.Timer
	for {
		wake := r.log.Commits()
		from := r.pos.SCN
		if r.pos.Part > 0 {
			from.Sequence-- // the entry the reader stopped inside
		}
		ents, err := r.log.ReadLog(from, r.Batch)
		if err != nil {
			return nil, err
		}
		if len(ents) > 0 {
			return r.events(ents)
		}
		if timer == nil {
			timer = time.NewTimer(idle)
			defer timer.Stop()
		}
		select {
		case <-wake:
		case <-timer.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// events turns entries into events and advances the position past them.
func (r *Reader) events(ents []partition.LogEntry) ([]Event, error) {
	var out []Event
	for _, e := range ents {
		skip := 0
		switch {
		case r.pos.Part > 0:
			if e.SCN != r.pos.SCN {
				return out, r.trimmed()
			}
			skip = int(r.pos.Part)
		case e.SCN.Sequence != r.pos.SCN.Sequence+1:
			return out, r.trimmed()
		}
		last := -1
		for i := skip; i < len(e.Writes); i++ {
			if r.filter.match(e.Writes[i].Table) {
				last = i
			}
		}
		for i := skip; i <= last; i++ {
			w := e.Writes[i]
			if !r.filter.match(w.Table) {
				continue
			}
			ev := Event{Partition: r.pos.Partition, SCN: e.SCN, Mtime: e.Mtime, Write: w, TxnEnd: i == last,
				Next: Position{Partition: r.pos.Partition, SCN: e.SCN, Part: uint32(i + 1)}}
			if ev.TxnEnd {
				ev.Next.Part = 0
			}
			out = append(out, ev)
		}
		r.pos = Position{Partition: r.pos.Partition, SCN: e.SCN}
	}
	return out, nil
}

// Bootstrap emits every document of tables in snap as snapshot events at
// the snapshot's SCN, in table then key order, the last one marked
// TxnEnd, and returns the position the change log continues from.
func Bootstrap(ctx context.Context, snap *partition.Snapshot, p int, tables []string, emit func(Event) error) (Position, error) {
	pos := Position{Partition: p, SCN: snap.SCN}
	var held *Event // emitted once the next is known, so the last can be marked
	for _, t := range tables {
		err := snap.Documents(t, func(key []byte, rec partition.Record) error {
			if held != nil {
				if err := emit(*held); err != nil {
					return err
				}
			} else {
				held = new(Event)
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			*held = Event{Partition: p, SCN: snap.SCN, Mtime: rec.Mtime, Snapshot: true, Next: pos,
				Write: partition.Write{Table: t, Key: append([]byte(nil), key...), Op: partition.OpInsert,
					AfterVersion: rec.Version, After: append([]byte(nil), rec.Avro...)}}
			return nil
		})
		if err != nil {
			return pos, err
		}
	}
	if held != nil {
		held.TxnEnd = true
		if err := emit(*held); err != nil {
			return pos, err
		}
	}
	return pos, nil
}
