package derived

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

// table returns the derived table db.table, or the problem to answer.
func (m *Manager) table(db, table string) (*schema.Table, error) {
	t, ok := m.cfg.Catalog.Table(db, table)
	if !ok {
		return nil, problem.New(problem.NotFound, "table %s.%s not found", db, table)
	}
	if !t.Derived() {
		return nil, problem.Field(problem.Conflict, "table", "table %s.%s is not derived: versions are pushed only to a table created with \"kind\": %q", db, table, schema.KindDerived)
	}
	return t, nil
}

// Push starts the next version of db.table from req's source: it claims
// the version number (refusing a second push while one is fetching or
// staged), then starts the bulk load into the version's stored table,
// which checks the build against the table before anything is fetched;
// a refused build gives the number back and answers the refusal.
func (m *Manager) Push(ctx context.Context, db, table string, req wire.DerivedPush) (wire.DerivedTable, error) {
	if _, err := m.table(db, table); err != nil {
		return wire.DerivedTable{}, err
	}
	if req.Source == "" {
		return wire.DerivedTable{}, problem.Field(problem.Malformed, "source", "source is required: a build's directory, file:///dir or http(s)://host/dir")
	}
	var v Version
	for {
		st, err := m.get(ctx, db, table)
		if err != nil {
			return wire.DerivedTable{}, err
		}
		next, pushed, err := Push(st.s, req, time.Now())
		if err != nil {
			return wire.DerivedTable{}, err
		}
		ok, err := m.put(ctx, next, st.rev)
		if err != nil {
			return wire.DerivedTable{}, err
		}
		if ok {
			v = pushed
			break
		}
	}
	load, _, err := m.cfg.Loads.StartInto(ctx, wire.LoadRequest{Source: req.Source, Throttle: req.Throttle}, schema.VersionTable(table, v.Version))
	if err != nil {
		if rerr := m.update(ctx, db, table, func(s Store) (Store, error) { return withdraw(s, v.Version), nil }); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return wire.DerivedTable{}, err
	}
	if err := m.update(ctx, db, table, func(s Store) (Store, error) {
		s = s.clone()
		if i := s.index(v.Version); i >= 0 {
			s.Versions[i].Load = load.ID
		}
		return s, nil
	}); err != nil {
		return wire.DerivedTable{}, err
	}
	return m.Status(ctx, db, table)
}

// withdraw removes version v whose load was refused, giving its number
// back when no later one was handed out.
func withdraw(s Store, v int) Store {
	s = s.clone()
	s.Versions = slices.DeleteFunc(s.Versions, func(x Version) bool { return x.Version == v })
	if s.Last == v {
		s.Last--
	}
	return s
}

// update applies change to db.table's record with a compare-and-swap,
// again on contention.
func (m *Manager) update(ctx context.Context, db, table string, change func(Store) (Store, error)) error {
	for {
		st, err := m.get(ctx, db, table)
		if err != nil {
			return err
		}
		next, err := change(st.s)
		if err != nil {
			return err
		}
		if equal(next, st.s) {
			return nil
		}
		ok, err := m.put(ctx, next, st.rev)
		if err != nil || ok {
			return err
		}
	}
}

// Swap makes the staged version current.
func (m *Manager) Swap(ctx context.Context, db, table string) (wire.DerivedTable, error) {
	return m.move(ctx, db, table, Swap)
}

// Rollback makes the previous version current again.
func (m *Manager) Rollback(ctx context.Context, db, table string) (wire.DerivedTable, error) {
	return m.move(ctx, db, table, Rollback)
}

// RollForward undoes a rollback.
func (m *Manager) RollForward(ctx context.Context, db, table string) (wire.DerivedTable, error) {
	return m.move(ctx, db, table, RollForward)
}

// Discard deletes a staged version (version 0: the staged one) from
// every replica without it ever becoming current.
func (m *Manager) Discard(ctx context.Context, db, table string, version int) (wire.DerivedTable, error) {
	if _, err := m.table(db, table); err != nil {
		return wire.DerivedTable{}, err
	}
	if err := m.update(ctx, db, table, func(s Store) (Store, error) { return Discard(s, version) }); err != nil {
		return wire.DerivedTable{}, err
	}
	return m.Status(ctx, db, table)
}

// move changes which version is current, then waits (within
// AnnounceWait) until every live node serves the change.
func (m *Manager) move(ctx context.Context, db, table string, change func(Store) (Store, error)) (wire.DerivedTable, error) {
	if _, err := m.table(db, table); err != nil {
		return wire.DerivedTable{}, err
	}
	if err := m.update(ctx, db, table, change); err != nil {
		return wire.DerivedTable{}, err
	}
	deadline := time.Now().Add(m.cfg.AnnounceWait)
	for {
		v, err := m.Status(ctx, db, table)
		if err != nil || v.Announced || time.Now().After(deadline) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Status returns db.table's versions with their progress.
func (m *Manager) Status(ctx context.Context, db, table string) (wire.DerivedTable, error) {
	if _, err := m.table(db, table); err != nil {
		return wire.DerivedTable{}, err
	}
	st, err := m.get(ctx, db, table)
	if err != nil {
		return wire.DerivedTable{}, err
	}
	reports, err := m.reports(ctx, db, table)
	if err != nil {
		return wire.DerivedTable{}, err
	}
	return m.view(ctx, st, m.inputs(ctx, st.s, reports), reports, true), nil
}

// List returns every derived table with a version, for GET /_cluster.
func (m *Manager) List(ctx context.Context) []wire.DerivedTable {
	snap, _, err := m.read(ctx)
	if err != nil {
		return nil
	}
	out := make([]wire.DerivedTable, 0, len(snap.stores))
	for k, st := range snap.stores {
		out = append(out, m.view(ctx, st, m.inputs(ctx, st.s, snap.reports[k]), snap.reports[k], false))
	}
	slices.SortFunc(out, func(a, b wire.DerivedTable) int {
		return strings.Compare(a.Database+"/"+a.Table, b.Database+"/"+b.Table)
	})
	return out
}

// reports reads the nodes' reports on db.table.
func (m *Manager) reports(ctx context.Context, db, table string) (map[string]Report, error) {
	snap, _, err := m.read(ctx)
	if err != nil {
		return nil, err
	}
	return snap.reports[tableKey(db, table)], nil
}

// view renders a record with its versions' progress: the loads' bytes
// and records (of every version when detail is set, else of those
// fetching), and per partition how many placed replicas are ready.
func (m *Manager) view(ctx context.Context, st stored, in Inputs, reports map[string]Report, detail bool) wire.DerivedTable {
	s := st.s
	out := wire.DerivedTable{Database: s.Database, Table: s.Table, Current: s.Current(), Retain: s.Retain, Versions: []wire.DerivedVersion{}}
	if out.Retain == 0 {
		out.Retain = DefaultRetain
	}
	out.Announced = m.announced(st, reports)
	for _, v := range s.Versions {
		dv := wire.DerivedVersion{Version: v.Version, State: v.State, Source: v.Source, Load: v.Load, Swap: v.Swap, Error: v.Error, Created: v.Created}
		var l wire.Load
		if v.Load != "" && (v.State == wire.VersionFetching || detail) {
			l, _ = m.cfg.Loads.Get(ctx, v.Load)
		}
		dv.Records, dv.TotalRecords, dv.Bytes, dv.TotalBytes = l.Records, l.TotalRecords, l.Bytes, l.TotalBytes
		if v.State == wire.VersionFetching || s.Dropping(v.Version) {
			for p, nodes := range in.Placement {
				dp := wire.DerivedPartition{Partition: p, Replicas: len(nodes)}
				if p < len(l.Partitions) {
					lp := l.Partitions[p]
					dp.State, dp.Bytes, dp.TotalBytes = lp.State, lp.Bytes, lp.TotalBytes
				}
				for _, n := range nodes {
					r := reports[n]
					list := r.Held[v.Version]
					if s.Dropping(v.Version) {
						list = r.Gone[v.Version]
					}
					if slices.Contains(list, p) {
						dp.Ready++
					}
				}
				dv.Partitions = append(dv.Partitions, dp)
			}
		}
		out.Versions = append(out.Versions, dv)
	}
	return out
}
