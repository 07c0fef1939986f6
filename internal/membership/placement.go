package membership

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PlacementChunk is how many partitions one placement key holds: a change
// to one partition rewrites its chunk, so the bytes written and watched
// grow with what changed, not with the database.
const PlacementChunk = 64

// chunk is the value of {prefix}/placement/{db}/{n}: partitions
// n·PlacementChunk onwards.
type chunk struct {
	Version int64 `json:"version"`
	// Partitions is the database's count, so that a reader knows when it
	// holds every chunk.
	Partitions int                  `json:"partitions"`
	Placements []PartitionPlacement `json:"placements"`
}

// chunkRecord is a chunk with the revisions of its key.
type chunkRecord struct {
	chunk
	create, mod int64
}

// PlacementKey is the key of chunk n of db's placement.
func PlacementKey(prefix, db string, n int) string {
	return fmt.Sprintf("%s%s%s/%05d", prefix, PlacementDir, db, n)
}

// Chunks is how many keys hold the placement of a database of partitions.
func Chunks(partitions int) int { return (partitions + PlacementChunk - 1) / PlacementChunk }

// EncodePlacement returns the value of every chunk of p that differs from
// old (all of them when old has another partition count, as an absent
// placement does), by chunk number.
func EncodePlacement(old, p Placement) (map[int]string, error) {
	out := map[int]string{}
	for n := range Chunks(len(p.Partitions)) {
		lo, hi := n*PlacementChunk, min((n+1)*PlacementChunk, len(p.Partitions))
		if len(old.Partitions) == len(p.Partitions) && slices.EqualFunc(old.Partitions[lo:hi], p.Partitions[lo:hi], samePartition) {
			continue
		}
		b, err := json.Marshal(chunk{Version: p.Version, Partitions: len(p.Partitions), Placements: p.Partitions[lo:hi]})
		if err != nil {
			return nil, err
		}
		out[n] = string(b)
	}
	return out, nil
}

func samePartition(a, b PartitionPlacement) bool {
	return a.Leader == b.Leader && slices.Equal(a.Replicas, b.Replicas)
}

// parsePlacementKey splits the name under PlacementDir into the database
// and its chunk number; n is -1 for a placement in the older one-key form
// ({prefix}/placement/{db}, still read).
func parsePlacementKey(name string) (db string, n int, ok bool) {
	db, num, chunked := strings.Cut(name, "/")
	if !chunked {
		return db, -1, db != ""
	}
	n, err := strconv.Atoi(num)
	return db, n, err == nil && n >= 0 && db != ""
}

// assemble joins a database's chunks into its placement, or reports false
// while any is missing or they disagree on the partition count.
func assemble(chunks map[int]chunkRecord) (PlacementRecord, bool) {
	first, ok := chunks[0]
	if !ok || first.Partitions < 1 || len(chunks) != Chunks(first.Partitions) {
		return PlacementRecord{}, false
	}
	rec := PlacementRecord{Placement: Placement{Partitions: make([]PartitionPlacement, 0, first.Partitions)}, Revisions: make([]int64, len(chunks))}
	for n := range len(chunks) {
		c, ok := chunks[n]
		want := min(PlacementChunk, first.Partitions-n*PlacementChunk)
		if !ok || c.Partitions != first.Partitions || len(c.Placements) != want {
			return PlacementRecord{}, false
		}
		rec.Partitions = append(rec.Partitions, c.Placements...)
		rec.Version = max(rec.Version, c.Version)
		rec.CreateRevision = max(rec.CreateRevision, c.create)
		rec.ModRevision = max(rec.ModRevision, c.mod)
		rec.Revisions[n] = c.mod
	}
	return rec, true
}

// placements holds what etcd has under PlacementDir, by database: chunks
// as they arrive, and the placement of every database whose chunks are
// all there (or that has one in the older one-key form).
type placements struct {
	chunks    map[string]map[int]chunkRecord
	legacy    map[string]PlacementRecord
	assembled map[string]PlacementRecord
}

func newPlacements() placements {
	return placements{chunks: map[string]map[int]chunkRecord{}, legacy: map[string]PlacementRecord{}, assembled: map[string]PlacementRecord{}}
}

func (ps *placements) clear() {
	clear(ps.chunks)
	clear(ps.legacy)
	clear(ps.assembled)
}

// apply takes one key's put (value non-nil) or delete.
func (ps *placements) apply(name string, value []byte, create, mod int64) error {
	db, n, ok := parsePlacementKey(name)
	if !ok {
		return fmt.Errorf("not a placement key")
	}
	var err error
	if n < 0 {
		delete(ps.legacy, db)
		if value != nil {
			var p Placement
			if err = json.Unmarshal(value, &p); err == nil {
				ps.legacy[db] = PlacementRecord{Placement: p, CreateRevision: create, ModRevision: mod}
			}
		}
	} else {
		cs := ps.chunks[db]
		delete(cs, n)
		if value != nil {
			var c chunk
			if err = json.Unmarshal(value, &c); err == nil {
				if cs == nil {
					cs = map[int]chunkRecord{}
					ps.chunks[db] = cs
				}
				cs[n] = chunkRecord{chunk: c, create: create, mod: mod}
			}
		}
		if len(cs) == 0 {
			delete(ps.chunks, db)
		}
	}
	ps.reassemble(db)
	return err
}

// reassemble recomputes db's placement: its chunks' when complete, else
// the one-key form's, else none. A one-key placement rewritten as chunks
// stays in etcd as the database's initial placement (see InitialPlacement),
// so its CreateRevision is the placement's.
func (ps *placements) reassemble(db string) {
	if rec, ok := assemble(ps.chunks[db]); ok {
		if old, ok := ps.legacy[db]; ok {
			rec.CreateRevision = old.CreateRevision
		}
		ps.assembled[db] = rec
	} else if rec, ok := ps.legacy[db]; ok {
		ps.assembled[db] = rec
	} else {
		delete(ps.assembled, db)
	}
}

// ReadPlacement reads db's placement as of revision rev (0: the latest).
func ReadPlacement(ctx context.Context, cli *clientv3.Client, prefix, db string, rev int64) (PlacementRecord, bool, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if rev > 0 {
		opts = append(opts, clientv3.WithRev(rev))
	}
	// The prefix without the slash also matches databases whose names
	// extend db's; apply skips them.
	resp, err := cli.Get(ctx, prefix+PlacementDir+db, opts...)
	if err != nil {
		return PlacementRecord{}, false, err
	}
	ps := newPlacements()
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), prefix+PlacementDir)
		if d, _, ok := parsePlacementKey(name); !ok || d != db {
			continue
		}
		if err := ps.apply(name, kv.Value, kv.CreateRevision, kv.ModRevision); err != nil {
			return PlacementRecord{}, false, fmt.Errorf("placement of %s: %s: %w", db, kv.Key, err)
		}
	}
	rec, ok := ps.assembled[db]
	return rec, ok, nil
}
