package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

const (
	// settle coalesces the changes that arrive together (a failover
	// changes many reports at once) into one planning round.
	settle = 50 * time.Millisecond
	// resync plans again without a change: dead-node delays expire, and a
	// missed notification costs at most this long.
	resync = 5 * time.Second
	// A transaction holds at most txnOps puts and about txnBytes of
	// placements, below etcd's defaults (128 operations, 1.5 MiB requests).
	txnOps   = 100
	txnBytes = 1 << 20
)

// errDeposed: another controller was elected; this one must stop writing.
var errDeposed = errors.New("controller: no longer the elected controller")

// driver is the active controller's state for one term.
type driver struct {
	self  string // this node's id
	cli   *clientv3.Client
	e     *concurrency.Election
	opts  Options
	log   *slog.Logger
	cat   *catalog.Catalog
	view  *membership.View
	nodes map[placement.NodeID]*nodeRecord
	// deaths is when each node judged dead was found dead, as recorded in
	// etcd ({prefix}/deaths/{id}) by this controller or an earlier one;
	// deathOps are this round's changes to those records.
	deaths   map[placement.NodeID]time.Time
	deathOps []clientv3.Op
	// written is every placement as etcd holds it, with the revision that
	// wrote it (this controller's writes are known before the watch
	// brings them).
	written map[string]writtenPlacement
	// reports keeps each partition's last group report, for the time
	// between its leader's death and the next leader's report.
	reports  map[placement.PartitionID]Report
	previous placement.Placement
	// unavailable is the last round's count of partitions without quorum.
	unavailable int
	// progress is the rebalance under way (or the last one), as last
	// written to etcd.
	progress membership.Rebalance
}

type nodeRecord struct {
	zone      string
	alive     bool
	deadSince time.Time
}

type writtenPlacement struct {
	membership.Placement
	rev int64 // ModRevision of its latest key; 0 if absent
	// chunks is the ModRevision of each chunk's key (membership.PlacementKey),
	// nil while the placement is absent or in the older one-key form.
	chunks []int64
}

func newDriver(ctx context.Context, cli *clientv3.Client, self string, e *concurrency.Election, opts Options, log *slog.Logger) (*driver, error) {
	d := &driver{
		self: self, cli: cli, e: e, opts: opts, log: log,
		nodes:   map[placement.NodeID]*nodeRecord{},
		written: map[string]writtenPlacement{},
		reports: map[placement.PartitionID]Report{},
	}
	var err error
	if d.cat, err = catalog.Open(ctx, cli, opts.Prefix); err != nil {
		return nil, err
	}
	if d.view, err = membership.Open(ctx, cli, opts.Prefix, log); err != nil {
		d.cat.Close()
		return nil, err
	}
	// A controller taking over counts the dead-node delay of the nodes
	// found dead before it from when they were found dead.
	d.deaths = readDeaths(ctx, cli, opts.Prefix)
	// A controller taking over continues the rebalance under way.
	if r, ok, err := membership.ReadRebalance(ctx, cli, opts.Prefix); err == nil && ok {
		d.progress = r
	}
	return d, nil
}

func (d *driver) close() {
	d.view.Close()
	d.cat.Close()
}

// run plans a round after every change (coalesced) and every resync,
// until ctx ends or another controller is elected.
func (d *driver) run(ctx context.Context) error {
	changes, cancelView := d.view.Subscribe()
	defer cancelView()
	schemas, cancelCatalog := d.cat.Subscribe()
	defer cancelCatalog()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changes:
		case <-schemas:
		case <-timer.C:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settle):
		}
		next, err := d.round(ctx, time.Now())
		switch {
		case errors.Is(err, errDeposed) || ctx.Err() != nil:
			return err
		case err != nil:
			d.log.Warn("placement round failed", "err", err)
			next = min(next, 200*time.Millisecond)
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// round is one planning round: observe, compute, write. It returns when
// the next round is due without a change.
func (d *driver) round(ctx context.Context, now time.Time) (time.Duration, error) {
	d.syncWritten()
	dbs := d.databases()
	written := d.placements()
	current := Current(dbs, written, d.report, d.live)
	nodes, next := d.judgeNodes(now, current)
	d.recordDeaths(ctx)
	plan, err := placement.Compute(placement.Input{
		Nodes: nodes, Databases: dbs, Current: current, Previous: d.previous,
		Options: placement.Options{MaxMoves: d.opts.MaxMoves, MaxMovesPerNode: d.opts.MaxMovesPerNode, Mode: d.opts.Mode},
	})
	if err != nil {
		return next, err
	}
	if len(plan.Unavailable) != d.unavailable {
		d.unavailable = len(plan.Unavailable)
		if d.unavailable > 0 {
			d.log.Warn("partitions without a live majority: placement leaves them alone", "count", d.unavailable, "first", plan.Unavailable[0].String())
		}
	}
	alive := map[placement.NodeID]bool{}
	for _, n := range nodes {
		alive[n.ID] = n.State == placement.Alive
	}
	changed := Apply(dbs, written, current, plan, alive)
	writes, err := d.write(ctx, changed)
	if d.opts.onRound != nil {
		d.opts.onRound(current, writes)
	}
	if err != nil {
		return next, err
	}
	d.previous = plan.Target
	if len(changed) > 0 {
		d.log.Info("placement written", "databases", len(changed), "created", len(plan.Create), "moves", len(plan.Moves), "pending", plan.Pending)
	}
	if err := d.reportProgress(ctx, now, current, plan); err != nil {
		return next, err
	}
	return next, nil
}

// reportProgress updates the rebalance progress from this round's plan and writes
// it to etcd when it changed. A move is in flight while its replica is a
// learner; the plan's moves and its pending ones remain to be made.
func (d *driver) reportProgress(ctx context.Context, now time.Time, cur placement.Placement, plan placement.Plan) error {
	var moving []string
	for pid, a := range cur {
		for _, l := range a.Learners {
			moving = append(moving, fmt.Sprintf("%s -> %s", pid, l))
		}
	}
	slices.Sort(moving)
	next := progressAfter(d.progress, now, len(moving), len(plan.Moves)+plan.Pending)
	next.Controller, next.Moving = d.self, moving
	next.MaxMoves, next.MaxMovesPerNode = d.opts.MaxMoves, d.opts.MaxMovesPerNode
	if sameProgress(d.progress, next) {
		return nil
	}
	b, err := json.Marshal(next)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := d.cli.Txn(wctx).
		If(clientv3.Compare(clientv3.CreateRevision(d.e.Key()), "=", d.e.Rev())).
		Then(clientv3.OpPut(d.opts.Prefix+membership.RebalanceKey, string(b))).Commit()
	if err != nil {
		return fmt.Errorf("write rebalance progress: %w", err)
	}
	if !resp.Succeeded {
		return errDeposed
	}
	if next.Active != d.progress.Active {
		if next.Active {
			d.log.Info("rebalance started", "moves", next.Total)
		} else {
			d.log.Info("rebalance finished", "moves", next.Done, "took", next.Finished.Sub(*next.Started))
		}
	}
	d.progress = next
	if d.opts.OnProgress != nil {
		d.opts.OnProgress(next)
	}
	return nil
}

// progressAfter is the rebalance progress after a round that found
// inFlight moves under way and queued more not started: a rebalance begins
// when moves appear after a round without any, its total grows by any
// moves that appear beyond those it knew, and it finishes when none
// remain.
func progressAfter(prev membership.Rebalance, now time.Time, inFlight, queued int) membership.Rebalance {
	remaining := inFlight + queued
	next := prev
	next.InFlight, next.Remaining = inFlight, remaining
	switch {
	case remaining > 0 && !prev.Active:
		t := now.UTC()
		next.Active, next.Started, next.Finished = true, &t, nil
		next.Total, next.Done = remaining, 0
	case remaining > 0:
		if grew := remaining - prev.Remaining; grew > 0 {
			next.Total += grew
		}
		next.Done = next.Total - remaining
	case prev.Active:
		t := now.UTC()
		next.Active, next.Finished, next.Done = false, &t, prev.Total
	}
	return next
}

func sameProgress(a, b membership.Rebalance) bool {
	return a.Active == b.Active && a.Total == b.Total && a.Done == b.Done && a.Remaining == b.Remaining &&
		a.InFlight == b.InFlight && a.Controller == b.Controller && slices.Equal(a.Moving, b.Moving) &&
		a.MaxMoves == b.MaxMoves && a.MaxMovesPerNode == b.MaxMovesPerNode
}

// syncWritten takes the placements the watch brings that are newer than
// what this controller knows (written by someone else, or its own writes
// seen back).
func (d *driver) syncWritten() {
	for db, rec := range d.view.Placements() {
		if rec.ModRevision > d.written[db].rev {
			d.written[db] = writtenPlacement{Placement: rec.Placement, rev: rec.ModRevision, chunks: rec.Revisions}
		}
	}
}

func (d *driver) databases() []placement.Database {
	var out []placement.Database
	for _, db := range d.cat.Databases() {
		out = append(out, placement.Database{
			Name: db.Name, Partitions: max(db.Partitions, 1), Replicas: min(max(db.Replicas, 1), 5),
		})
	}
	return out
}

// placements are the written placements without their revisions.
func (d *driver) placements() map[string]membership.Placement {
	out := make(map[string]membership.Placement, len(d.written))
	for db, w := range d.written {
		out[db] = w.Placement
	}
	return out
}

// live reports whether node id is registered.
func (d *driver) live(id placement.NodeID) bool {
	_, ok := d.view.Node(string(id))
	return ok
}

// report is pid's group report, or its last one while none is published.
func (d *driver) report(pid placement.PartitionID) (Report, bool) {
	g, leader, ok := d.view.Group(pid.Database, pid.Index)
	if ok {
		r := Report{GroupReport: g, Leader: placement.NodeID(leader)}
		d.reports[pid] = r
		return r, true
	}
	r, ok := d.reports[pid]
	return r, ok
}

// died returns when node id was found dead: as recorded, or now, which
// this round then records.
func (d *driver) died(id placement.NodeID, now time.Time) time.Time {
	if t, ok := d.deaths[id]; ok {
		return t
	}
	d.deaths[id] = now
	d.deathOps = append(d.deathOps, clientv3.OpPut(deathKey(d.opts.Prefix, id), now.UTC().Format(time.RFC3339Nano)))
	return now
}

// recordDeaths writes this round's changes to the death records, best
// effort: a record that is not written makes a successor count that
// node's delay from its own takeover, as if it had none. A death is
// written only where none is recorded, so a deposed controller cannot
// move an earlier one later.
func (d *driver) recordDeaths(ctx context.Context) {
	for _, op := range d.deathOps {
		txn := d.cli.Txn(ctx)
		if op.IsPut() {
			txn = txn.If(clientv3.Compare(clientv3.CreateRevision(string(op.KeyBytes())), "=", 0))
		}
		if _, err := txn.Then(op).Commit(); err != nil {
			d.log.Warn("dead-node record not written", "key", string(op.KeyBytes()), "err", err)
		}
	}
	d.deathOps = nil
}

// deathKey holds when node id was found dead (RFC 3339), while it stays
// dead: the dead-node delay runs from it, whichever controller is active.
func deathKey(prefix string, id placement.NodeID) string {
	return prefix + membership.DeathsDir + string(id)
}

// readDeaths reads every recorded death (none if etcd does not answer).
func readDeaths(ctx context.Context, cli *clientv3.Client, prefix string) map[placement.NodeID]time.Time {
	out := map[placement.NodeID]time.Time{}
	resp, err := cli.Get(ctx, prefix+membership.DeathsDir, clientv3.WithPrefix())
	if err != nil {
		return out
	}
	for _, kv := range resp.Kvs {
		if t, err := time.Parse(time.RFC3339Nano, string(kv.Value)); err == nil {
			out[placement.NodeID(strings.TrimPrefix(string(kv.Key), prefix+membership.DeathsDir))] = t
		}
	}
	return out
}

// judgeNodes applies the dead-node delay to every node registered or
// named by the current placement, and returns when the next node's delay
// expires (at most resync).
func (d *driver) judgeNodes(now time.Time, cur placement.Placement) ([]placement.Node, time.Duration) {
	live := map[placement.NodeID]bool{}
	for _, n := range d.view.Nodes() {
		id := placement.NodeID(n.ID)
		live[id] = true
		rec := d.nodes[id]
		if rec == nil {
			rec = &nodeRecord{}
			d.nodes[id] = rec
		}
		rec.zone, rec.alive, rec.deadSince = n.Zone, true, time.Time{}
		if _, ok := d.deaths[id]; ok {
			delete(d.deaths, id)
			d.deathOps = append(d.deathOps, clientv3.OpDelete(deathKey(d.opts.Prefix, id)))
		}
	}
	for id, rec := range d.nodes {
		if rec.alive && !live[id] {
			rec.alive, rec.deadSince = false, d.died(id, now)
			d.log.Info("node dead", "id", id, "replaced_after", d.opts.DeadNodeDelay)
		}
	}
	// A node dead before this controller took over (or never seen alive)
	// counts from when an earlier controller found it dead, else from now.
	for _, a := range cur {
		for _, id := range slices.Concat(a.Replicas, a.Learners) {
			if d.nodes[id] == nil {
				d.nodes[id] = &nodeRecord{deadSince: d.died(id, now)}
			}
		}
	}
	records := make([]NodeRecord, 0, len(d.nodes))
	for id, rec := range d.nodes {
		// Standby, draining and removed nodes give everything away and
		// take nothing (the operator's intent, `doppio cluster …`).
		drain := !d.view.Intent(string(id)).State.TakesReplicas()
		records = append(records, NodeRecord{ID: id, Zone: rec.zone, Alive: rec.alive, DeadSince: rec.deadSince, Draining: drain})
	}
	nodes, gone := Judge(records, now, d.opts.DeadNodeDelay)
	next := resync
	if gone > 0 {
		next = min(next, gone)
	}
	return nodes, max(next, 10*time.Millisecond)
}

// write stores the chunks of the changed placements that changed: one
// transaction for all of them (several only past etcd's limits, never
// splitting a database), fenced by the election and by each key's
// revision.
func (d *driver) write(ctx context.Context, changed map[string]membership.Placement) (writes int, err error) {
	dbs := make([]string, 0, len(changed))
	for db := range changed {
		dbs = append(dbs, db)
	}
	sort.Strings(dbs)
	var batch []dbWrite
	ops, size := 0, 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		writes++
		err := d.commit(ctx, batch)
		batch, ops, size = nil, 0, 0
		return err
	}
	for _, db := range dbs {
		w := dbWrite{db: db, p: changed[db], old: d.written[db]}
		// A placement in the one-key form is rewritten whole, as chunks.
		base := w.old.Placement
		if w.old.chunks == nil {
			base = membership.Placement{}
		}
		if w.chunks, err = membership.EncodePlacement(base, w.p); err != nil {
			return writes, err
		}
		n, b := len(w.chunks), 0
		for _, v := range w.chunks {
			b += len(v)
		}
		if len(batch) > 0 && (ops+n > txnOps || size+b > txnBytes) {
			if err := flush(); err != nil {
				return writes, err
			}
		}
		batch, ops, size = append(batch, w), ops+n, size+b
	}
	return writes, flush()
}

// dbWrite is one database's share of a transaction: the values of the
// chunks that changed, over what this controller last saw.
type dbWrite struct {
	db     string
	p      membership.Placement
	old    writtenPlacement
	chunks map[int]string
}

func (d *driver) commit(ctx context.Context, batch []dbWrite) error {
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(d.e.Key()), "=", d.e.Rev())}
	var ops []clientv3.Op
	for _, w := range batch {
		if w.old.rev != 0 && w.old.chunks == nil {
			// The one-key form stays, unchanged, as the database's initial
			// placement: nodes bootstrap new groups from it.
			key := d.opts.Prefix + membership.PlacementDir + w.db
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", w.old.rev))
		}
		for _, n := range slices.Sorted(maps.Keys(w.chunks)) {
			key := membership.PlacementKey(d.opts.Prefix, w.db, n)
			if n < len(w.old.chunks) {
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(key), "=", w.old.chunks[n]))
			} else {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
			}
			ops = append(ops, clientv3.OpPut(key, w.chunks[n]))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := d.cli.Txn(wctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(d.e.Key())).Commit()
	if err != nil {
		return fmt.Errorf("write placements: %w", err)
	}
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) == 0 || kvs[0].CreateRevision != d.e.Rev() {
			return errDeposed
		}
		// Someone else wrote a placement: read it and plan again.
		return d.reload(ctx, batch)
	}
	for _, w := range batch {
		chunks := slices.Clone(w.old.chunks)
		if chunks == nil {
			chunks = make([]int64, membership.Chunks(len(w.p.Partitions)))
		}
		for n := range w.chunks {
			chunks[n] = resp.Header.Revision
		}
		d.written[w.db] = writtenPlacement{Placement: w.p, rev: resp.Header.Revision, chunks: chunks}
	}
	return nil
}

func (d *driver) reload(ctx context.Context, batch []dbWrite) error {
	var dbs []string
	for _, w := range batch {
		rec, ok, err := membership.ReadPlacement(ctx, d.cli, d.opts.Prefix, w.db, 0)
		if err != nil {
			return err
		}
		if !ok {
			delete(d.written, w.db)
		} else {
			d.written[w.db] = writtenPlacement{Placement: rec.Placement, rev: rec.ModRevision, chunks: rec.Revisions}
		}
		dbs = append(dbs, w.db)
	}
	return fmt.Errorf("placements of %v changed concurrently; planning again", dbs)
}

func samePartitions(a, b []membership.PartitionPlacement) bool {
	return slices.EqualFunc(a, b, func(x, y membership.PartitionPlacement) bool {
		return x.Leader == y.Leader && slices.Equal(x.Replicas, y.Replicas)
	})
}

func ids(ns []string) []placement.NodeID {
	out := make([]placement.NodeID, len(ns))
	for i, n := range ns {
		out[i] = placement.NodeID(n)
	}
	return out
}

func names(ns []placement.NodeID) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n)
	}
	return out
}
