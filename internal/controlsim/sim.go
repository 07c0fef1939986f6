package controlsim

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/doppio-db/doppio/internal/lifecycle"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

// historyLines is how many of the last log lines a report keeps.
const historyLines = 60

// world is one run's simulated cluster.
type world struct {
	cfg  Config
	rng  *rand.Rand
	now  time.Duration
	q    queue
	seq  uint64
	tok  uint64
	busy int // queued events that are not scenario events

	nodes  []*node
	byID   map[placement.NodeID]int
	byRaft map[uint64]int
	// live are the registered nodes by Raft id, as every node's
	// lifecycle loop sees them.
	live     map[uint64]lifecycle.Node
	zoneDown []bool
	zoneBack [][]int // nodes to restart when their zone comes back

	dbs    []placement.Database
	groups []*group
	byPart map[placement.PartitionID]int

	// The controller: what etcd holds of the placements, its last plan's
	// target, whether a round or its timer is queued.
	written  map[string]membership.Placement
	previous placement.Placement
	roundDue bool
	roundEnd time.Duration // the last round's end (Timing.Round)
	timerTok uint64

	addingTotal int
	overTotal   bool

	// sinceConverged: something changed since the last convergence;
	// sinceSweep: since the last sweep. pending is the first event not
	// converged yet.
	sinceConverged, sinceSweep bool
	pending                    int

	rep     *Report
	history []string
	fatal   error
}

// Run simulates cfg's scenario from its seed and reports what happened.
// It returns an error for a configuration it cannot run, or when a
// decision function fails.
func Run(cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.check(); err != nil {
		return Report{}, err
	}
	wall := time.Now()
	sc, _ := scenarioNamed(cfg.Scenario)
	events := sc.events(cfg, rand.New(rand.NewPCG(cfg.Seed, 1)))
	slices.SortStableFunc(events, func(a, b Event) int { return cmp.Compare(a.At, b.At) })
	w := &world{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 2)),
		byID: map[placement.NodeID]int{}, byRaft: map[uint64]int{}, live: map[uint64]lifecycle.Node{},
		zoneDown: make([]bool, cfg.Zones), zoneBack: make([][]int, cfg.Zones),
		byPart: map[placement.PartitionID]int{}, written: map[string]membership.Placement{},
		rep: &Report{Setup: setupOf(cfg)},
	}
	for i := range cfg.Nodes {
		w.addNode(i % cfg.Zones)
	}
	parts := cfg.Replicas / cfg.RF
	for d := range cfg.Databases {
		db := placement.Database{Name: fmt.Sprintf("db%02d", d), Partitions: parts / cfg.Databases, Replicas: cfg.RF}
		if d < parts%cfg.Databases {
			db.Partitions++
		}
		w.record(Event{Kind: Create, Database: db}.String())
		w.createDatabase(db)
	}
	var last time.Duration
	for _, e := range events {
		w.schedule(e.At, &event{kind: evScenario, sc: e})
		last = e.At
	}
	deadline := last + cfg.Tail
	for steps := 0; w.q.Len() > 0 && w.fatal == nil && w.q[0].at <= deadline; steps++ {
		e := w.pop()
		w.dispatch(e)
		if w.busy == 0 && w.unconverged() && w.sinceSweep {
			// Only the periodic passes could move the cluster on now.
			w.sinceSweep = false
			w.schedule(time.Second, &event{kind: evSweep})
		}
		if cfg.Progress != nil && steps%4096 == 0 && w.now < last {
			cfg.Progress(w.now, last)
		}
	}
	if w.fatal != nil {
		return *w.rep, w.fatal
	}
	if cfg.Progress != nil {
		cfg.Progress(last, last)
	}
	w.rep.End = w.now
	w.rep.Converged = !w.unconverged()
	if !w.rep.Converged {
		w.log("not converged: %d events since the last convergence", len(w.rep.Events)-w.pending)
	}
	w.rep.History = w.history
	w.rep.Wall = time.Since(wall)
	return *w.rep, nil
}

func (w *world) dispatch(e *event) {
	switch e.kind {
	case evScenario:
		w.record(e.sc.String())
		w.scenarioEvent(e.sc)
	case evRound:
		w.round()
	case evTimer:
		w.timer(e)
	case evReconcile:
		w.reconcile(e)
	case evChangeDone:
		w.changeDone(e)
	case evSnapshotDone:
		w.snapshotDone(e)
	case evElection:
		w.election(e)
	case evLeaseExpired:
		w.leaseExpired(e)
	case evCaughtUp:
		w.caughtUp(e)
	case evSweep:
		w.log("sweep: the queue is empty, the cluster not converged")
		for _, g := range w.groups {
			w.scheduleReconcile(g, 0)
		}
		w.scheduleRound()
	}
}

// unconverged: an event has not converged yet, or something changed
// since the last convergence.
func (w *world) unconverged() bool {
	return w.pending < len(w.rep.Events) || w.sinceConverged
}

// settled reports whether every partition with a live majority has
// exactly its placed voters, no learner, no change under way and its
// preferred leader (when that one runs).
func (w *world) settled() bool {
	for _, g := range w.groups {
		if !g.exists {
			return false
		}
		if !w.liveMajority(g) {
			continue // placement leaves it alone
		}
		if len(g.learners) > 0 || g.leader < 0 || g.changingBy >= 0 || len(g.voters) != len(g.placed) {
			return false
		}
		for _, p := range g.placed {
			if !g.isVoter(p) {
				return false
			}
		}
		if g.preferred >= 0 && g.preferred != g.leader && w.nodes[g.preferred].alive {
			return false
		}
	}
	return true
}

// converged records a convergence: how long each event since the last
// one took, the moves against the ideal, the balance, the zones.
func (w *world) converged() {
	w.sinceConverged = false
	for i := w.pending; i < len(w.rep.Events); i++ {
		ev := &w.rep.Events[i]
		ev.Converged, ev.After = true, w.now-ev.At
	}
	w.pending = len(w.rep.Events)
	ideal := 0
	for _, g := range w.groups {
		if g.episodeVoters != nil {
			for _, v := range g.voters {
				if !slices.Contains(g.episodeVoters, v) {
					ideal++
				}
			}
		}
		g.episodeVoters = slices.Clone(g.voters)
	}
	w.rep.Moves.Ideal += ideal
	b := w.balance()
	w.rep.Balance = b
	w.rep.WorstBalance = Balance{
		Leaders:            max(w.rep.WorstBalance.Leaders, b.Leaders),
		LeadersPerDatabase: max(w.rep.WorstBalance.LeadersPerDatabase, b.LeadersPerDatabase),
		Replicas:           max(w.rep.WorstBalance.Replicas, b.Replicas),
	}
	w.checkZones()
	w.log("converged: %d replica adds so far (ideal %d), leader spread %d, replica spread %d", w.rep.Moves.Adds, w.rep.Moves.Ideal, b.Leaders, b.Replicas)
}

// eligible: the node takes replicas and leaders (it runs, is registered
// and not draining).
func (w *world) eligible(n *node) bool { return n.alive && n.registered && !n.draining }

// balance is the spread of leaders over the eligible nodes, and of
// replicas over those of each zone (zones of different sizes hold the
// same replicas of a partition each, so they differ across zones).
func (w *world) balance() Balance {
	leaders := make([]int, len(w.nodes))
	replicas := make([]int, len(w.nodes))
	perDB := map[string][]int{}
	for _, g := range w.groups {
		for _, v := range g.voters {
			replicas[v]++
		}
		if g.leader >= 0 {
			leaders[g.leader]++
			if perDB[g.id.Database] == nil {
				perDB[g.id.Database] = make([]int, len(w.nodes))
			}
			perDB[g.id.Database][g.leader]++
		}
	}
	// spread is over the eligible nodes of zone z, or of all zones if z
	// is -1.
	spread := func(counts []int, z int) int {
		lo, hi := -1, -1
		for i, n := range w.nodes {
			if !w.eligible(n) || z >= 0 && n.zone != z {
				continue
			}
			if lo < 0 || counts[i] < lo {
				lo = counts[i]
			}
			hi = max(hi, counts[i])
		}
		return max(hi-lo, 0)
	}
	b := Balance{Leaders: spread(leaders, -1)}
	for z := range w.cfg.Zones {
		b.Replicas = max(b.Replicas, spread(replicas, z))
	}
	for _, c := range perDB {
		b.LeadersPerDatabase = max(b.LeadersPerDatabase, spread(c, -1))
	}
	return b
}

// checkZones reports every partition whose voters crowd a zone while
// another zone, with fewer of them by two, had an eligible node to take
// one. Partitions with a voter on a node that is not running are left
// out: placement keeps such replicas where they are.
func (w *world) checkZones() {
	eligible := make([]int, w.cfg.Zones)
	for _, n := range w.nodes {
		if w.eligible(n) {
			eligible[n.zone]++
		}
	}
	count := make([]int, w.cfg.Zones)
	capacity := make([]int, w.cfg.Zones)
groups:
	for _, g := range w.groups {
		if !g.exists || !w.liveMajority(g) {
			continue
		}
		clear(count)
		copy(capacity, eligible)
		for _, v := range g.voters {
			n := w.nodes[v]
			if !n.alive || !n.registered {
				continue groups
			}
			count[n.zone]++
			if !w.eligible(n) {
				capacity[n.zone]++
			}
		}
		lo, hi := -1, -1
		for z := range count {
			if count[z] < capacity[z] && (lo < 0 || count[z] < count[lo]) {
				lo = z
			}
			if hi < 0 || count[z] > count[hi] {
				hi = z
			}
		}
		if lo >= 0 && count[hi] >= count[lo]+2 {
			w.violate(Zone, g, "", fmt.Sprintf("voters %v: %d in %s, %d in %s", w.names(g.voters), count[hi], zoneName(hi), count[lo], zoneName(lo)))
		}
	}
}

// record adds an event to the report (a scenario's, or a node judged
// gone) and to the history.
func (w *world) record(what string) {
	w.rep.Events = append(w.rep.Events, EventResult{At: w.now, What: what})
	w.sinceConverged, w.sinceSweep = true, true
	w.log("event: %s", what)
}

func (w *world) violate(kind ViolationKind, g *group, n placement.NodeID, detail string) {
	v := Violation{At: w.now, Kind: kind, Node: n, Detail: detail}
	if g != nil {
		v.Partition = g.id
	}
	w.rep.Violations = append(w.rep.Violations, v)
	w.log("VIOLATION %s", v)
}

func (w *world) log(format string, args ...any) {
	if len(w.history) == historyLines {
		w.history = slices.Delete(w.history, 0, 1)
	}
	w.history = append(w.history, clock(w.now)+" "+fmt.Sprintf(format, args...))
}

// between draws a duration from r uniformly.
func (w *world) between(r [2]time.Duration) time.Duration { return between(w.rng, r[0], r[1]) }

// at is the wall-clock time simulated time d stands for: the
// controller's decisions take a time.Time.
func at(d time.Duration) time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(d) }

// clock formats simulated time as hours:minutes:seconds.milliseconds.
func clock(d time.Duration) string {
	ms := d.Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d.%03d", ms/3600000, ms/60000%60, ms/1000%60, ms%1000)
}
