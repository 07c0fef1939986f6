package datastream

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/problem"
)

// View is a datastream as the API shows it: the definition, with defaults
// filled and its secrets (SASL password, TLS client key) shown as
// Redacted, and its state.
type View struct {
	Definition
	// State is "running", "paused" (the whole stream) or
	// "partially-paused" (some partitions, see PausedPartitions).
	State            string    `json:"state"`
	PausedPartitions []int     `json:"pausedPartitions"`
	Created          time.Time `json:"created"`
	Updated          time.Time `json:"updated"`
}

// view is the record as answers show it, its secrets redacted.
func (r *Record) view() View {
	v := View{Definition: r.Definition, State: StateRunning, PausedPartitions: []int{}, Created: r.Created, Updated: r.Updated}
	v.Sink = v.Sink.redacted()
	switch {
	case r.Paused:
		v.State = StatePaused
	case len(r.PausedPartitions) > 0:
		v.State = "partially-paused"
		v.PausedPartitions = slices.Clone(r.PausedPartitions)
	}
	return v
}

// maxAttempts bounds compare-and-swap retries of one change.
const maxAttempts = 32

// update reads a datastream's record and writes fn's change of it,
// compare-and-swap on its revision, retried on contention. fn receives
// nil when the datastream does not exist.
func (m *Manager) update(ctx context.Context, name string, fn func(r *Record) (*Record, error)) (*Record, bool, error) {
	key := m.defKey(name)
	for range maxAttempts {
		resp, err := m.cli.Get(ctx, key)
		if err != nil {
			return nil, false, err
		}
		var cur *Record
		var rev int64
		if len(resp.Kvs) > 0 {
			cur = new(Record)
			if err := json.Unmarshal(resp.Kvs[0].Value, cur); err != nil {
				return nil, false, err
			}
			rev = resp.Kvs[0].ModRevision
		}
		next, err := fn(cur)
		if err != nil {
			return nil, false, err
		}
		val, err := json.Marshal(next)
		if err != nil {
			return nil, false, err
		}
		cmp := clientv3.Compare(clientv3.ModRevision(key), "=", rev)
		if cur == nil {
			cmp = clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		}
		txn := m.cli.Txn(ctx).If(cmp)
		if cur == nil {
			// Leftovers of an earlier datastream of this name go with it.
			txn = txn.Then(clientv3.OpPut(key, string(val)),
				clientv3.OpDelete(m.tasksDir(name), clientv3.WithPrefix()))
		} else {
			txn = txn.Then(clientv3.OpPut(key, string(val)))
		}
		tr, err := txn.Commit()
		if err != nil {
			return nil, false, err
		}
		if tr.Succeeded {
			m.applyOwn(name, next)
			return next, cur == nil, nil
		}
	}
	return nil, false, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1,
		Detail: "datastream " + name + " is being changed concurrently; retry"}
}

// applyOwn makes this node's tasks see its own change at once (the watch
// brings it too, later).
func (m *Manager) applyOwn(name string, r *Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r == nil {
		delete(m.records, name)
	} else {
		m.records[name] = r
	}
	m.notifyLocked()
}

// Put creates the datastream named by def or updates it; created reports
// which. The database and "from" are fixed at creation (Conflict).
func (m *Manager) Put(ctx context.Context, def Definition) (View, bool, error) {
	now := time.Now().UTC()
	r, created, err := m.update(ctx, def.Name, func(cur *Record) (*Record, error) {
		def := def // each attempt fills the secrets from the record it read
		if cur != nil {
			def.Sink = def.Sink.clone()
			def.Sink.keepSecrets(&cur.Sink)
		}
		if err := def.Sink.checkSecrets(); err != nil {
			return nil, err
		}
		if cur == nil {
			return &Record{Definition: def, Created: now, Updated: now}, nil
		}
		if cur.Database != def.Database {
			return nil, problem.Field(problem.Conflict, "database", "datastream %s reads database %q; the database of a datastream cannot change (delete it and create it again)", def.Name, cur.Database)
		}
		if cur.From != def.From {
			return nil, problem.Field(problem.Conflict, "from", "datastream %s started from %q; where a datastream starts cannot change (delete it and create it again)", def.Name, cur.From)
		}
		next := *cur
		next.Definition = def
		next.Updated = now
		// Partitions joining the stream start now, not at its creation.
		if len(cur.Partitions) > 0 {
			for _, p := range def.Partitions {
				if !slices.Contains(cur.Partitions, p) {
					if next.Since == nil {
						next.Since = map[int]int64{}
					}
					next.Since[p] = now.UnixMilli()
				}
			}
			if len(def.Partitions) == 0 {
				db, _ := m.schemas.Database(def.Database)
				for p := range db.Partitions {
					if !slices.Contains(cur.Partitions, p) {
						if next.Since == nil {
							next.Since = map[int]int64{}
						}
						next.Since[p] = now.UnixMilli()
					}
				}
			}
		}
		return &next, nil
	})
	if err != nil {
		return View{}, false, err
	}
	return r.view(), created, nil
}

// Get returns a datastream.
func (m *Manager) Get(ctx context.Context, name string) (View, error) {
	resp, err := m.cli.Get(ctx, m.defKey(name))
	if err != nil {
		return View{}, err
	}
	if len(resp.Kvs) == 0 {
		return View{}, notFound(name)
	}
	var r Record
	if err := json.Unmarshal(resp.Kvs[0].Value, &r); err != nil {
		return View{}, err
	}
	return r.view(), nil
}

// List returns every datastream, by name.
func (m *Manager) List(ctx context.Context) ([]View, error) {
	resp, err := m.cli.Get(ctx, m.prefix+dirDefs, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	out := []View{}
	for _, kv := range resp.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			m.log.Warn("ignoring malformed datastream", "key", string(kv.Key), "err", err)
			continue
		}
		out = append(out, r.view())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes a datastream with its checkpoints and ownerships: its
// tasks stop (their fenced writes fail from now on).
func (m *Manager) Delete(ctx context.Context, name string) error {
	key := m.defKey(name)
	resp, err := m.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), ">", 0)).Then(
		clientv3.OpDelete(key),
		clientv3.OpDelete(m.ownersDir(name), clientv3.WithPrefix()),
		clientv3.OpDelete(m.tasksDir(name), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return notFound(name)
	}
	m.applyOwn(name, nil)
	return nil
}

// Pause pauses the whole datastream (no partitions) or some partitions.
// A paused task keeps its ownership and position; nothing is delivered.
func (m *Manager) Pause(ctx context.Context, name string, partitions []int) (View, error) {
	return m.setPaused(ctx, name, partitions, func(cur, next *Record) {
		if len(partitions) == 0 {
			next.Paused, next.PausedPartitions = true, nil
		} else if !next.Paused {
			next.PausedPartitions = sortedUnique(append(slices.Clone(cur.PausedPartitions), partitions...))
		}
	})
}

// Resume resumes the whole datastream (no partitions) or some partitions,
// including partitions auto-paused for failing. Resuming some partitions
// of a wholly paused stream leaves the others paused.
func (m *Manager) Resume(ctx context.Context, name string, partitions []int) (View, error) {
	return m.setPaused(ctx, name, partitions, func(cur, next *Record) {
		next.Resumes++
		if len(partitions) == 0 {
			next.Paused, next.PausedPartitions = false, nil
			next.ResumedAll = next.Resumes
		} else {
			if next.Paused {
				db, _ := m.schemas.Database(cur.Database)
				next.Paused, next.PausedPartitions = false, cur.PartitionList(db.Partitions)
			}
			next.PausedPartitions = slices.DeleteFunc(slices.Clone(next.PausedPartitions), func(p int) bool { return slices.Contains(partitions, p) })
			rp := make(map[int]uint64, len(cur.ResumedPartitions)+len(partitions))
			for k, v := range cur.ResumedPartitions {
				rp[k] = v
			}
			for _, p := range partitions {
				rp[p] = next.Resumes
			}
			next.ResumedPartitions = rp
		}
		if len(next.PausedPartitions) == 0 {
			next.PausedPartitions = nil
		}
	})
}

// checkPartitions refuses partitions the datastream does not read.
func (m *Manager) checkPartitions(r *Record, ps []int) error {
	db, ok := m.schemas.Database(r.Database)
	if !ok {
		return nil
	}
	for _, p := range ps {
		if p < 0 || p >= db.Partitions || !r.Selects(p) {
			return problem.Field(problem.NotFound, "partitions", "datastream %s does not read partition %d of database %s", r.Name, p, r.Database)
		}
	}
	return nil
}

// setPaused applies change to a copy of the datastream's record, once its
// partitions are checked, and stores it as updated now.
func (m *Manager) setPaused(ctx context.Context, name string, partitions []int, change func(cur, next *Record)) (View, error) {
	r, _, err := m.update(ctx, name, func(cur *Record) (*Record, error) {
		if cur == nil {
			return nil, notFound(name)
		}
		if err := m.checkPartitions(cur, partitions); err != nil {
			return nil, err
		}
		next := *cur
		change(cur, &next)
		next.Updated = time.Now().UTC()
		return &next, nil
	})
	if err != nil {
		return View{}, err
	}
	return r.view(), nil
}
