package controller

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/doppio-db/doppio/internal/catalog"
	"github.com/doppio-db/doppio/internal/embedetcd"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
	"github.com/doppio-db/doppio/internal/schema"
	"github.com/doppio-db/doppio/internal/testwait"
)

const prefix = "/t"

var quiet = slog.New(slog.DiscardHandler)

type cluster struct {
	t         *testing.T
	endpoints []string
	cli       *clientv3.Client
	cat       *catalog.Catalog

	mu    sync.Mutex
	nodes map[string]*membership.Registration
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	srv, err := embedetcd.Start(context.Background(), filepath.Join(t.TempDir(), "etcd"), quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() }) // last: every client is closed by then
	c := &cluster{t: t, endpoints: srv.Endpoints(), nodes: map[string]*membership.Registration{}}
	c.cli = c.client()
	if c.cat, err = catalog.Open(context.Background(), c.cli, prefix); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.mu.Lock()
		for _, r := range c.nodes {
			r.Close()
		}
		c.mu.Unlock()
		c.cat.Close()
	})
	return c
}

// client returns a new etcd client, closed at the end of the test.
func (c *cluster) client() *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

// register adds a fake storage node: a registration and nothing else.
func (c *cluster) register(id, zone string) {
	c.t.Helper()
	r, err := membership.Register(context.Background(), c.cli, prefix, membership.Node{ID: id, Zone: zone, HTTP: id + ":1", GRPC: id + ":2"}, time.Second, quiet)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.nodes[id] = r
	c.mu.Unlock()
}

// kill takes a fake node away (its lease revoked: dead at once).
func (c *cluster) kill(id string) {
	c.mu.Lock()
	r := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	r.Close()
}

func (c *cluster) createDB(name string, partitions, replicas int) {
	c.t.Helper()
	if _, _, err := c.cat.PutDatabase(context.Background(), schema.Database{Name: name, Partitions: partitions, Replicas: replicas}); err != nil {
		c.t.Fatal(err)
	}
}

// run starts a controller as node id on its own client; stop ends it the
// way a process would (resign) and kill the way kill -9 would (the client
// goes away, the election lease expires).
func (c *cluster) run(id string, opts Options) (stop, kill func()) {
	cli := c.client()
	ctx, cancel := context.WithCancel(context.Background())
	opts.Prefix, opts.Logger = prefix, quiet
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, cli, id, opts)
	}()
	stop = func() { cancel(); <-done }
	kill = func() { cli.Close() } // its Run ends at the test's end
	c.t.Cleanup(stop)
	return stop, kill
}

func (c *cluster) active() string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	id, err := Active(ctx, c.cli, prefix)
	if err != nil {
		c.t.Fatal(err)
	}
	return id
}

// candidates lists the nodes campaigning to be the controller, the
// active one first.
func (c *cluster) candidates() []string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := c.cli.Get(ctx, prefix+electionDir+"/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		out = append(out, string(kv.Value))
	}
	return out
}

// placed reads database db's placement from etcd (not from a watch, which
// may trail the controller's writes).
func (c *cluster) placed(db string) membership.Placement {
	c.t.Helper()
	rec, ok, err := membership.ReadPlacement(context.Background(), c.cli, prefix, db, 0)
	if err != nil || !ok {
		c.t.Fatalf("placement of %s: %v, %v", db, ok, err)
	}
	return rec.Placement
}

// roundLog records a controller's planning rounds (Options.onRound): the
// placement each started from and the etcd writes it made.
type roundLog struct {
	mu     sync.Mutex
	rounds []loggedRound
}

type loggedRound struct {
	current placement.Placement
	writes  int
}

func (l *roundLog) observe(current placement.Placement, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rounds = append(l.rounds, loggedRound{current, writes})
}

func (l *roundLog) all() []loggedRound {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rounds)
}

// quietRound waits for a round that started from a placement done accepts
// and wrote nothing: the controller saw that state and had its chance to
// act. It returns the rounds up to that one and their etcd writes.
func (l *roundLog) quietRound(t *testing.T, d time.Duration, what string, done func(placement.Placement) bool) (rounds []loggedRound, writes int) {
	t.Helper()
	eventually(t, d, what, func() (bool, string) {
		all := l.all()
		rounds, writes = nil, 0
		for _, r := range all {
			rounds = append(rounds, r)
			writes += r.writes
			if r.writes == 0 && done(r.current) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d rounds, none quiet from that state", len(all))
	})
	return rounds, writes
}

// settledOn accepts a placement of n partitions whose replicas are three
// voters, all on live nodes, one of them the leader, and no learners.
func settledOn(n int, live ...string) func(placement.Placement) bool {
	return func(cur placement.Placement) bool {
		if len(cur) != n {
			return false
		}
		for _, a := range cur {
			if len(a.Replicas) != 3 || len(a.Learners) != 0 || !slices.Contains(a.Replicas, a.Leader) {
				return false
			}
			for _, r := range a.Replicas {
				if !slices.Contains(live, string(r)) {
					return false
				}
			}
		}
		return true
	}
}

func eventually(t *testing.T, d time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	return testwait.For(t, d, what, cond)
}

// write is one write of placements: every key it changed, at one revision.
type write struct {
	rev        int64
	at         time.Time
	placements map[string]membership.Placement
}

// recorder records every write under the placement directory.
type recorder struct {
	mu     sync.Mutex
	writes []write
}

func record(t *testing.T, cli *clientv3.Client) *recorder {
	r := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	wch := cli.Watch(ctx, prefix+membership.PlacementDir, clientv3.WithPrefix())
	go func() {
		for resp := range wch {
			r.mu.Lock()
			for _, ev := range resp.Events {
				// A write changes some chunks of a database's placement:
				// record the whole placement as of that write.
				db, _, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), prefix+membership.PlacementDir), "/")
				if n := len(r.writes); n == 0 || r.writes[n-1].rev != ev.Kv.ModRevision {
					r.writes = append(r.writes, write{rev: ev.Kv.ModRevision, at: time.Now(), placements: map[string]membership.Placement{}})
				}
				if _, seen := r.writes[len(r.writes)-1].placements[db]; seen {
					continue
				}
				rec, ok, err := membership.ReadPlacement(ctx, cli, prefix, db, ev.Kv.ModRevision)
				if err != nil || !ok {
					continue
				}
				r.writes[len(r.writes)-1].placements[db] = rec.Placement
			}
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) all() []write {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.writes)
}

// first waits until the watch brought n writes and returns those.
func (r *recorder) first(t *testing.T, n int) []write {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("%d writes recorded", n), func() (bool, string) {
		return len(r.all()) >= n, fmt.Sprintf("%d", len(r.all()))
	})
	return r.all()[:n]
}

// TestOneControllerIsActiveAndAnotherTakesOver runs two controllers: one
// is active; when its process dies (no resignation) the other takes over
// once the election lease expires, and when that one stops cleanly the
// first one's replacement takes over at once.
func TestOneControllerIsActiveAndAnotherTakesOver(t *testing.T) {
	c := newCluster(t)
	_, killA := c.run("a", Options{})
	eventually(t, 5*time.Second, "a active", func() (bool, string) { return c.active() == "a", c.active() })
	stopB, _ := c.run("b", Options{})
	eventually(t, 5*time.Second, "b campaigns", func() (bool, string) {
		got := c.candidates()
		return slices.Equal(got, []string{"a", "b"}), fmt.Sprint(got)
	})
	if got := c.active(); got != "a" {
		t.Fatalf("active = %q after b joined, want a", got)
	}
	killed := time.Now()
	killA()
	eventually(t, 6*time.Second, "b takes over", func() (bool, string) { return c.active() == "b", c.active() })
	took := time.Since(killed)
	t.Logf("b active %v after a's process died (session TTL %v)", took.Round(10*time.Millisecond), DefaultSessionTTL)
	if took > 4*time.Second {
		t.Fatalf("takeover took %v", took)
	}

	c.run("c", Options{})
	eventually(t, 5*time.Second, "c campaigns", func() (bool, string) {
		got := c.candidates()
		return slices.Equal(got, []string{"b", "c"}), fmt.Sprint(got)
	})
	stopB() // resigns: c takes over without waiting for the lease
	took = eventually(t, 2*time.Second, "c takes over", func() (bool, string) { return c.active() == "c", c.active() })
	t.Logf("c active %v after b resigned", took.Round(10*time.Millisecond))
}

// TestNewDatabasesArePlacedInOneWrite creates two databases before any
// controller runs: the controller places both whole in one etcd write, and
// a database created later in one more.
func TestNewDatabasesArePlacedInOneWrite(t *testing.T) {
	c := newCluster(t)
	for i := range 4 {
		c.register(fmt.Sprint("n", i), fmt.Sprint("z", i%2))
	}
	c.createDB("a", 64, 3)
	c.createDB("b", 8, 2)
	rec := record(t, c.cli)
	start := time.Now()
	var rounds roundLog
	c.run("n0", Options{onRound: rounds.observe})
	defer func() { t.Logf("placed in %v", time.Since(start)) }()
	eventually(t, 5*time.Second, "first write", func() (bool, string) { return len(rec.all()) >= 1, "" })
	c.createDB("c", 16, 1)
	eventually(t, 5*time.Second, "second write", func() (bool, string) { return len(rec.all()) >= 2, "" })
	// A round that started from c placed and wrote nothing: no write
	// follows c's.
	_, n := rounds.quietRound(t, 10*time.Second, "a quiet round after c's placement", func(cur placement.Placement) bool {
		_, ok := cur[placement.PartitionID{Database: "c"}]
		return ok
	})
	writes := rec.first(t, n)
	if len(writes) != 2 || len(writes[0].placements) != 2 || len(writes[1].placements) != 1 {
		t.Fatalf("writes = %+v, want a and b in one, then c", writes)
	}
	for db, want := range map[string][2]int{"a": {64, 3}, "b": {8, 2}, "c": {16, 1}} {
		var p membership.Placement
		for _, w := range writes {
			if wp, ok := w.placements[db]; ok {
				p = wp
			}
		}
		if p.Version != 1 || len(p.Partitions) != want[0] {
			t.Fatalf("%s: version %d, %d partitions", db, p.Version, len(p.Partitions))
		}
		leaders := map[string]int{}
		for i, pp := range p.Partitions {
			zones := map[byte]bool{}
			for _, r := range pp.Replicas {
				zones[r[1]%2] = true
			}
			if len(pp.Replicas) != want[1] || !slices.Contains(pp.Replicas, pp.Leader) || len(zones) != min(want[1], 2) {
				t.Fatalf("%s/%d: %+v", db, i, pp)
			}
			leaders[pp.Leader]++
		}
		lo, hi := want[0], 0
		for i := range 4 {
			lo, hi = min(lo, leaders[fmt.Sprint("n", i)]), max(hi, leaders[fmt.Sprint("n", i)])
		}
		if hi-lo > 1 {
			t.Fatalf("%s: leaders not spread: %v", db, leaders)
		}
	}
}

// groups plays the storage nodes' part: for every placed partition, the
// preferred leader (or the first live replica) reports the placed replicas
// as its voters at once, as if every move completed instantly.
func (c *cluster) groups(t *testing.T) {
	view, err := membership.Open(context.Background(), c.cli, prefix, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; view.Close() })
	changes, unsubscribe := view.Subscribe()
	go func() {
		defer close(done)
		defer unsubscribe()
		type part struct {
			db string
			p  int
		}
		leaders, terms := map[part]string{}, map[part]uint64{}
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
			case <-time.After(100 * time.Millisecond):
			}
			c.mu.Lock()
			for db, rec := range view.Placements() {
				for i, pp := range rec.Partitions {
					k := part{db, i}
					lead := ""
					for _, r := range append([]string{pp.Leader}, pp.Replicas...) {
						if c.nodes[r] != nil && slices.Contains(pp.Replicas, r) {
							lead = r
							break
						}
					}
					if old := leaders[k]; old != lead {
						if r := c.nodes[old]; r != nil {
							r.SetGroup(db, i, nil)
						}
						leaders[k] = lead
						terms[k]++
					}
					if lead != "" {
						voters := slices.Clone(pp.Replicas)
						slices.Sort(voters)
						c.nodes[lead].SetGroup(db, i, &membership.GroupReport{Term: terms[k], Voters: voters})
					}
				}
			}
			c.mu.Unlock()
		}
	}()
}

// TestDeadNodeIsReplacedWithOneWritePerRound kills one of four nodes
// holding a 256-partition database: leaderships move first (one write),
// then, past the dead-node delay, its replicas are recreated on the others
// in throttled rounds, each round one etcd write for all its partitions.
func TestDeadNodeIsReplacedWithOneWritePerRound(t *testing.T) {
	const partitions, maxMoves, delay = 256, 32, time.Second
	c := newCluster(t)
	for i := range 4 {
		c.register(fmt.Sprint("n", i), "")
	}
	c.groups(t)
	c.createDB("db", partitions, 3)
	rec := record(t, c.cli)
	var log roundLog
	c.run("n0", Options{DeadNodeDelay: delay, MaxMoves: maxMoves, onRound: log.observe})

	// Settled: placed, and every group reports its placement.
	view, err := membership.Open(context.Background(), c.cli, prefix, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	settled := func(live []string) (bool, string) {
		rec, ok := view.Placement("db")
		if !ok {
			return false, "no placement"
		}
		for i, pp := range rec.Partitions {
			g, leader, ok := view.Group("db", i)
			if !ok || len(pp.Replicas) != 3 || !slices.Contains(live, pp.Leader) || leader != pp.Leader {
				return false, fmt.Sprintf("partition %d: %+v, report %+v by %s", i, pp, g, leader)
			}
			for _, r := range pp.Replicas {
				if !slices.Contains(live, r) || !slices.Contains(g.Voters, r) {
					return false, fmt.Sprintf("partition %d: %+v, report %+v", i, pp, g)
				}
			}
		}
		return true, ""
	}
	eventually(t, 10*time.Second, "placed", func() (bool, string) { return settled([]string{"n0", "n1", "n2", "n3"}) })
	_, n := log.quietRound(t, 10*time.Second, "a quiet round once placed", settledOn(partitions, "n0", "n1", "n2", "n3"))
	before := rec.first(t, n)
	if len(before) != 1 {
		t.Fatalf("%d writes before the kill, want 1 (the creation)", len(before))
	}
	last := before[0].placements["db"]
	onDead, ledByDead := 0, 0
	for _, pp := range last.Partitions {
		if slices.Contains(pp.Replicas, "n3") {
			onDead++
		}
		if pp.Leader == "n3" {
			ledByDead++
		}
	}

	killed := time.Now()
	c.kill("n3")
	took := eventually(t, 20*time.Second, "replicas recreated", func() (bool, string) { return settled([]string{"n0", "n1", "n2"}) })
	upTo, n := log.quietRound(t, 10*time.Second, "a quiet round once replaced", settledOn(partitions, "n0", "n1", "n2"))
	writes := rec.first(t, n)[1:]
	t.Logf("n3 held %d replicas and led %d partitions; replaced %v after the kill (delay %v, %d moves in flight) in %d writes",
		onDead, ledByDead, took.Round(10*time.Millisecond), delay, maxMoves, len(writes))

	// Each write changes many partitions; the first, before the delay,
	// only leaderships.
	prev := last
	for i, w := range writes {
		p := w.placements["db"]
		leadersMoved, replicasMoved := 0, 0
		for j, pp := range p.Partitions {
			if pp.Leader != prev.Partitions[j].Leader {
				leadersMoved++
			}
			if !slices.Equal(pp.Replicas, prev.Partitions[j].Replicas) {
				replicasMoved++
			}
		}
		t.Logf("write %d (version %d, +%v): %d partitions' replicas, %d leaders", i+1, p.Version, w.at.Sub(killed).Round(time.Millisecond), replicasMoved, leadersMoved)
		if w.at.Sub(killed) < delay-100*time.Millisecond && replicasMoved != 0 {
			t.Fatalf("write %d, %v after the kill, before the delay, moved replicas", i+1, w.at.Sub(killed))
		}
		// The dead node's preferred leaderships all go at once (to the
		// leaders the groups elected); other transfers are throttled.
		if i == 0 && (leadersMoved < ledByDead || leadersMoved > ledByDead+maxMoves) {
			t.Fatalf("first write after the kill moved %d leaders, want the dead node's %d and at most %d more", leadersMoved, ledByDead, maxMoves)
		}
		if p.Version != prev.Version+1 {
			t.Fatalf("write %d: version %d after %d", i+1, p.Version, prev.Version)
		}
		prev = p
	}
	// Adds then removals, MaxMoves at a time, and leader moves: one write
	// per planning round, never one per partition.
	var rounds []int // etcd writes of each round that wrote
	for _, r := range upTo {
		if r.writes > 0 {
			rounds = append(rounds, r.writes)
		}
	}
	for i, n := range rounds {
		if n != 1 {
			t.Fatalf("round %d wrote %d times, want once", i+1, n)
		}
	}
	if len(rounds) != len(writes)+1 {
		t.Fatalf("%d rounds wrote, etcd saw %d writes", len(rounds), len(writes)+1)
	}
	if min := 2 * onDead / maxMoves; len(writes) < min || len(writes) > 4*min {
		t.Fatalf("%d writes to move %d replicas %d at a time", len(writes), onDead, maxMoves)
	}
	if took < delay {
		t.Fatalf("replaced after %v, before the dead-node delay %v", took, delay)
	}
}

// TestShardedMySQLModeLeadsAllOrNothing: in sharded-mysql mode every node
// leads all of its partitions or none, as the paper's comparison needs.
func TestShardedMySQLModeLeadsAllOrNothing(t *testing.T) {
	c := newCluster(t)
	for i := range 6 {
		c.register(fmt.Sprint("n", i), "")
	}
	c.createDB("db", 24, 3)
	rec := record(t, c.cli)
	mode, err := ParseMode("sharded-mysql")
	if err != nil {
		t.Fatal(err)
	}
	c.run("n0", Options{Mode: mode})
	eventually(t, 5*time.Second, "placed", func() (bool, string) { return len(rec.all()) == 1, "" })
	p := rec.all()[0].placements["db"]
	leads, follows := map[string]int{}, map[string]int{}
	for _, pp := range p.Partitions {
		for _, r := range pp.Replicas {
			if r == pp.Leader {
				leads[r]++
			} else {
				follows[r]++
			}
		}
	}
	for i := range 6 {
		n := fmt.Sprint("n", i)
		if leads[n] > 0 && follows[n] > 0 || leads[n]+follows[n] == 0 {
			t.Fatalf("%s leads %d and follows %d partitions: %+v", n, leads[n], follows[n], p.Partitions)
		}
	}
	if len(leads) != 2 {
		t.Fatalf("leaders %v, want one per replica set of 3", leads)
	}
}

func TestRebalanceProgress(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type round struct{ inFlight, queued, total, done int }
	steps := []round{
		{0, 0, 0, 0},   // nothing to do: no rebalance
		{2, 8, 10, 0},  // begins: 10 moves
		{4, 4, 10, 2},  // 2 done
		{3, 7, 12, 2},  // a node died: the total grows by what appeared
		{1, 0, 12, 11}, // almost
		{0, 0, 12, 12}, // finished
		{1, 2, 3, 0},   // a new rebalance
	}
	var r membership.Rebalance
	for i, s := range steps {
		prev := r
		r = progressAfter(r, at(i), s.inFlight, s.queued)
		if r.Total != s.total || r.Done != s.done || r.InFlight != s.inFlight || r.Remaining != s.inFlight+s.queued {
			t.Fatalf("round %d: %+v, want total %d done %d", i, r, s.total, s.done)
		}
		if active := s.inFlight+s.queued > 0; r.Active != active {
			t.Fatalf("round %d: active %t", i, r.Active)
		}
		if r.Active && !prev.Active && !r.Started.Equal(at(i)) {
			t.Fatalf("round %d: started %v", i, r.Started)
		}
		if !r.Active && prev.Active && (r.Finished == nil || !r.Finished.Equal(at(i)) || r.Progress() != 1) {
			t.Fatalf("round %d: finished %v, progress %v", i, r.Finished, r.Progress())
		}
	}
}

// deadNodeCluster registers nodes n0-n3, places database db (8 partitions,
// 3 replicas) with n0's controller under delay, and waits until every node
// holds replicas. onNode counts the partitions with a replica on node id
// (-1 before the placement exists) and renders the placement.
func deadNodeCluster(t *testing.T, delay time.Duration) (c *cluster, stop func(), onNode func(id string) (int, string)) {
	c = newCluster(t)
	for i := range 4 {
		c.register(fmt.Sprint("n", i), "")
	}
	c.groups(t)
	c.createDB("db", 8, 3)
	stop, _ = c.run("n0", Options{DeadNodeDelay: delay})
	view, err := membership.Open(context.Background(), c.cli, prefix, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(view.Close)
	onNode = func(id string) (int, string) {
		rec, ok := view.Placement("db")
		if !ok || len(rec.Partitions) != 8 {
			return -1, "no placement"
		}
		n := 0
		for _, pp := range rec.Partitions {
			if slices.Contains(pp.Replicas, id) {
				n++
			}
		}
		return n, fmt.Sprintf("%+v", rec.Partitions)
	}
	eventually(t, 10*time.Second, "placed on every node", func() (bool, string) {
		for i := range 4 {
			if n, js := onNode(fmt.Sprint("n", i)); n <= 0 {
				return false, js
			}
		}
		return true, ""
	})
	return c, stop, onNode
}

// TestTheDeadNodeDelayOutlivesTheController: a node dies, the controller
// that found it dead gives way before the delay has run out, and its
// successor recreates the dead node's replicas once the delay has run
// from the death, not from the takeover.
func TestTheDeadNodeDelayOutlivesTheController(t *testing.T) {
	const delay = 4 * time.Second
	c, stop, onNode := deadNodeCluster(t, delay)

	killed := time.Now()
	c.kill("n3")
	eventually(t, 5*time.Second, "the death recorded", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), prefix+"/deaths/n3")
		if err != nil || len(resp.Kvs) != 1 {
			return false, fmt.Sprint(resp, err)
		}
		return true, ""
	})
	time.Sleep(time.Until(killed.Add(delay / 2)))
	stop()
	c.run("n1", Options{DeadNodeDelay: delay})
	eventually(t, 5*time.Second, "n1 the active controller", func() (bool, string) {
		id := c.active()
		return id == "n1", id
	})
	tookOver := time.Now()
	eventually(t, 3*delay, "the dead node's replicas recreated", func() (bool, string) {
		n, js := onNode("n3")
		return n == 0, js
	})
	replaced := time.Now()
	if replaced.Sub(killed) < delay {
		t.Fatalf("replaced %v after the death, before the delay of %v", replaced.Sub(killed), delay)
	}
	if !replaced.Before(tookOver.Add(delay)) {
		t.Fatalf("replaced %v after the takeover: the successor started the delay again", replaced.Sub(tookOver))
	}
	c.register("n3", "")
	eventually(t, 5*time.Second, "the death record gone once n3 is back", func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), prefix+"/deaths/n3")
		return err == nil && len(resp.Kvs) == 0, fmt.Sprint(resp, err)
	})
}

// A node that comes back while no controller is active, and dies again, is
// judged by its second death: its registration deleted the record of the
// first, so the next controller starts the delay when it finds the node
// dead, instead of replacing its replicas at once because the first death
// is more than a delay old.
func TestANodeBackWithNoControllerIsNotJudgedByItsEarlierDeath(t *testing.T) {
	const delay = 4 * time.Second
	c, stop, onNode := deadNodeCluster(t, delay)
	onN3 := func() (int, string) { return onNode("n3") }
	deathRecord := func() (bool, string) {
		resp, err := c.cli.Get(context.Background(), prefix+membership.DeathsDir+"n3")
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Kvs) == 1, fmt.Sprint(resp.Kvs)
	}

	firstDeath := time.Now()
	c.kill("n3")
	eventually(t, 5*time.Second, "the first death recorded", deathRecord)
	stop() // no controller from here until n3 has died again
	c.register("n3", "")
	if recorded, kvs := deathRecord(); recorded {
		t.Fatalf("n3 registered again, and its death record is still there: %s", kvs)
	}
	// n3 stays up past a delay from its first death, then dies again.
	time.Sleep(time.Until(firstDeath.Add(delay + time.Second)))
	c.kill("n3")
	var log roundLog
	c.run("n1", Options{DeadNodeDelay: delay, onRound: log.observe})
	eventually(t, 5*time.Second, "n1 the active controller", func() (bool, string) {
		id := c.active()
		return id == "n1", id
	})
	tookOver := time.Now()
	eventually(t, 5*time.Second, "the second death recorded", deathRecord)
	// Had the first record survived, n3's replicas would go at once: in
	// the round that recorded the second death (n1 alone writes records)
	// or in any later one. Wait for a round to end after the record was
	// seen, then read the placement it left.
	seen := len(log.all())
	eventually(t, 10*time.Second, "a round after the second death was recorded", func() (bool, string) {
		return len(log.all()) > seen, ""
	})
	n3 := 0
	for _, pp := range c.placed("db").Partitions {
		if slices.Contains(pp.Replicas, "n3") {
			n3++
		}
	}
	if n3 == 0 {
		t.Fatalf("n3's replicas were replaced %v after the takeover, within the delay of its second death", time.Since(tookOver))
	}
	eventually(t, 3*delay, "n3's replicas recreated after the delay", func() (bool, string) {
		n, js := onN3()
		return n == 0, js
	})
	if since := time.Since(tookOver); since < delay {
		t.Fatalf("n3's replicas replaced %v after the takeover, before the delay of %v", since, delay)
	}
}
