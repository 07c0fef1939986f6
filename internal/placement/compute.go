package placement

import (
	"errors"
	"fmt"
	"slices"
	"sort"
)

// Compute returns the target placement of in.Databases on in.Nodes and the
// next throttled moves from in.Current towards it. It is a pure,
// deterministic function of in: no I/O, no clock, no randomness. Call it
// again whenever the cluster or the current placement changes; a placement
// that already meets the constraints yields no moves.
func Compute(in Input) (Plan, error) {
	return compute(in, knobs{})
}

// knobs are testing knobs: a test passes the plain searches that the fast
// ones replaced (a scan of every node for a target, of every pair of
// nodes for a balancing step) and holds both to the same plan.
type knobs struct {
	bestTarget      func(s *state, p *part, only int) int
	balanceReplicas func(s *state, count, order func(n int) int, dbs []int)
	balanceLeaders  func(s *state, count, order func(n int) int, dbs []int)
}

func compute(in Input, k knobs) (Plan, error) {
	s, err := newState(in)
	if err != nil {
		return Plan{}, err
	}
	s.knobs = k
	switch in.Options.Mode {
	case Spread:
		s.spreadReplicas()
	case ShardedMySQL:
		s.shardedReplicas()
	default:
		return Plan{}, fmt.Errorf("placement: unknown mode %d", in.Options.Mode)
	}
	s.chooseLeaders()
	return s.plan(), nil
}

// state is one computation: nodes and partitions by dense index, the target
// being built and the per-node counts of it.
type state struct {
	opts  Options
	knobs knobs

	ids      []NodeID // sorted
	index    map[NodeID]int
	zone     []int // zone index of each node
	zones    int
	status   []NodeState
	draining []bool
	// eligible nodes (alive, not draining) take new replicas and leaders.
	eligible []bool
	// zoneEligible counts eligible nodes per zone.
	zoneEligible []int

	dbs   []Database
	parts []*part

	// counts of target replicas and leaders, per database and in total.
	cnt, lcnt [][]int
	tot, ltot []int
	// pairs[a][b] counts the target partitions with replicas on both a and
	// b. Spreading them spreads a dead node's leaderships and snapshot
	// sources over many nodes instead of a fixed few.
	pairs [][]int
	// fresh[d][n] counts target replicas of database d on n that do not
	// exist yet (free to retarget).
	fresh [][]int
	// on[d][n] lists, in partition order (positions in parts), the
	// partitions of database d with a target replica on n: a move from n
	// looks at n's replicas only, not at every partition of d.
	on [][][]int
	// epoch[n] changes whenever a partition with a target replica on n
	// changes its target replicas; stuck[{d, a, b}] is a's epoch when no
	// replica of d could move from a to b. Until a's epoch moves, that
	// answer stands (it depends only on the partitions on a and the zones
	// of a and b), so a balance does not search the same pair again.
	epoch []uint64
	stuck map[[3]int]uint64
	// cross[d][a] caches, per zone, whether some replica of database d
	// on a could move to that zone (see crossZone); nil until asked.
	cross [][]crossing
	// ledBy[d][n] lists, in partition order, the partitions of database d
	// whose target leader is n.
	ledBy [][][]int
	// heaps[d] orders each zone's eligible nodes by load in database d
	// for bestTarget; nil until a target in d is looked for. built lists
	// the databases whose heaps exist (each add or drop updates them).
	heaps []*loadHeaps
	built []int
	// Scratch zone counts, so the per-candidate checks allocate nothing.
	swapCount, swapCapacity []int
	pickCount, pickCapacity []int
	fixCount, fixCapacity   []int
	stack                   []int
}

// part is one partition: what its replicas report and its target.
type part struct {
	id       PartitionID
	pos      int // index in state.parts
	db, rf   int
	voters   []int
	learners []int
	leader   int // -1: none known
	isNew    bool
	fixed    bool  // unavailable: target = current
	members  []int // target replicas
	tleader  int   // target leader, -1: none possible
	previous []int // Input.Previous's replicas
	// moving: the last plan changes this partition and the change is not
	// complete; balancing leaves the replicas that plan chose alone.
	moving bool
	prefer []int // ShardedMySQL: leader preference
}

func (p *part) has(n int) bool       { return slices.Contains(p.members, n) }
func (p *part) isVoter(n int) bool   { return slices.Contains(p.voters, n) }
func (p *part) isLearner(n int) bool { return slices.Contains(p.learners, n) }
func (p *part) current(n int) bool   { return p.isVoter(n) || p.isLearner(n) }

func newState(in Input) (*state, error) {
	s := &state{opts: in.Options, index: map[NodeID]int{}}
	if s.opts.MaxMoves <= 0 {
		s.opts.MaxMoves = DefaultMaxMoves
	}
	known := map[NodeID]Node{}
	for _, n := range in.Nodes {
		if n.ID == "" {
			return nil, errors.New("placement: node with empty id")
		}
		if _, dup := known[n.ID]; dup {
			return nil, fmt.Errorf("placement: node %s listed twice", n.ID)
		}
		known[n.ID] = n
	}
	// Nodes only the placement mentions are gone (removed from the cluster).
	ids := map[NodeID]bool{}
	for id := range known {
		ids[id] = true
	}
	for pid, a := range in.Current {
		for _, l := range [][]NodeID{a.Replicas, a.Learners} {
			for _, id := range l {
				if id == "" {
					return nil, fmt.Errorf("placement: partition %s has a replica with empty node id", pid)
				}
				ids[id] = true
			}
		}
	}
	for id := range ids {
		s.ids = append(s.ids, id)
	}
	slices.Sort(s.ids)
	zoneIndex := map[string]int{}
	var zoneNames []string
	for _, id := range s.ids {
		if n, ok := known[id]; ok && n.State != Gone {
			if _, ok := zoneIndex[n.Zone]; !ok {
				zoneIndex[n.Zone] = -1
				zoneNames = append(zoneNames, n.Zone)
			}
		}
	}
	slices.Sort(zoneNames)
	for i, z := range zoneNames {
		zoneIndex[z] = i
	}
	s.zones = len(zoneNames) + 1 // the last zone holds gone nodes
	s.zoneEligible = make([]int, s.zones)
	for i, id := range s.ids {
		s.index[id] = i
		n, ok := known[id]
		if !ok || n.State == Gone {
			s.zone = append(s.zone, s.zones-1)
			s.status = append(s.status, Gone)
			s.draining = append(s.draining, false)
			s.eligible = append(s.eligible, false)
			continue
		}
		if n.State != Alive && n.State != Down {
			return nil, fmt.Errorf("placement: node %s has unknown state %d", id, n.State)
		}
		el := n.State == Alive && !n.Draining
		s.zone = append(s.zone, zoneIndex[n.Zone])
		s.status = append(s.status, n.State)
		s.draining = append(s.draining, n.Draining)
		s.eligible = append(s.eligible, el)
		if el {
			s.zoneEligible[zoneIndex[n.Zone]]++
		}
	}

	s.dbs = slices.Clone(in.Databases)
	sort.Slice(s.dbs, func(i, j int) bool { return s.dbs[i].Name < s.dbs[j].Name })
	for i, db := range s.dbs {
		switch {
		case i > 0 && s.dbs[i-1].Name == db.Name:
			return nil, fmt.Errorf("placement: database %q listed twice", db.Name)
		case db.Partitions < 1:
			return nil, fmt.Errorf("placement: database %q has %d partitions", db.Name, db.Partitions)
		case db.Replicas < 1 || db.Replicas > 5:
			return nil, fmt.Errorf("placement: database %q has replication factor %d, want 1..5", db.Name, db.Replicas)
		}
	}
	nn := len(s.ids)
	s.cnt, s.lcnt, s.fresh = make([][]int, len(s.dbs)), make([][]int, len(s.dbs)), make([][]int, len(s.dbs))
	s.on, s.ledBy = make([][][]int, len(s.dbs)), make([][][]int, len(s.dbs))
	for i := range s.dbs {
		s.cnt[i], s.lcnt[i], s.fresh[i] = make([]int, nn), make([]int, nn), make([]int, nn)
		s.on[i], s.ledBy[i] = make([][]int, nn), make([][]int, nn)
	}
	s.tot, s.ltot = make([]int, nn), make([]int, nn)
	s.epoch, s.stuck = make([]uint64, nn), map[[3]int]uint64{}
	s.cross, s.heaps = make([][]crossing, len(s.dbs)), make([]*loadHeaps, len(s.dbs))
	scratch := make([]int, 6*s.zones)
	s.swapCount, s.swapCapacity = scratch[0:s.zones], scratch[s.zones:2*s.zones]
	s.pickCount, s.pickCapacity = scratch[2*s.zones:3*s.zones], scratch[3*s.zones:4*s.zones]
	s.fixCount, s.fixCapacity = scratch[4*s.zones:5*s.zones], scratch[5*s.zones:]
	s.pairs = make([][]int, nn)
	cells := make([]int, nn*nn)
	for i := range s.pairs {
		s.pairs[i] = cells[i*nn : (i+1)*nn : (i+1)*nn]
	}

	for d, db := range s.dbs {
		for i := range db.Partitions {
			p := &part{id: PartitionID{db.Name, i}, pos: len(s.parts), db: d, rf: db.Replicas, leader: -1, tleader: -1}
			a := in.Current[p.id]
			// Node ids map one to one to indexes: a repeated index is a
			// repeated id.
			for _, id := range a.Replicas {
				n := s.index[id]
				if slices.Contains(p.voters, n) {
					return nil, fmt.Errorf("placement: partition %s lists node %s twice", p.id, id)
				}
				p.voters = append(p.voters, n)
			}
			for _, id := range a.Learners {
				n := s.index[id]
				if slices.Contains(p.voters, n) || slices.Contains(p.learners, n) {
					return nil, fmt.Errorf("placement: partition %s lists node %s twice", p.id, id)
				}
				p.learners = append(p.learners, n)
			}
			for _, id := range in.Previous[p.id].Replicas {
				if n, ok := s.index[id]; ok {
					p.previous = append(p.previous, n)
				}
			}
			slices.Sort(p.voters)
			slices.Sort(p.learners)
			slices.Sort(p.previous)
			if p.previous != nil {
				cur := slices.Concat(p.voters, p.learners)
				slices.Sort(cur)
				p.moving = !slices.Equal(cur, p.previous)
			}
			if l, ok := s.index[a.Leader]; ok && a.Leader != "" && p.isVoter(l) {
				p.leader = l
			}
			p.isNew = len(p.voters) == 0 && len(p.learners) == 0
			if !p.isNew {
				live := 0
				for _, v := range p.voters {
					if s.status[v] == Alive {
						live++
					}
				}
				// Raft changes membership only through a majority.
				p.fixed = 2*live <= len(p.voters)
			}
			s.parts = append(s.parts, p)
		}
	}
	return s, nil
}

// add and drop keep the replica counts in step with the target.
func (s *state) add(p *part, n int) {
	s.touch(p, n)
	for _, m := range p.members {
		s.pairs[m][n]++
		s.pairs[n][m]++
	}
	p.members = append(p.members, n)
	if !p.current(n) {
		s.fresh[p.db][n]++
	}
	s.cnt[p.db][n]++
	s.tot[n]++
	s.on[p.db][n] = insertSorted(s.on[p.db][n], p.pos)
	s.fixHeaps(n)
}

func (s *state) drop(p *part, n int) {
	s.touch(p, n)
	i := slices.Index(p.members, n)
	p.members = slices.Delete(p.members, i, i+1)
	for _, m := range p.members {
		s.pairs[m][n]--
		s.pairs[n][m]--
	}
	if !p.current(n) {
		s.fresh[p.db][n]--
	}
	s.cnt[p.db][n]--
	s.tot[n]--
	s.on[p.db][n] = deleteSorted(s.on[p.db][n], p.pos)
	s.fixHeaps(n)
}

// insertSorted and deleteSorted keep a sorted list of partition positions.
func insertSorted(l []int, pos int) []int {
	i, _ := slices.BinarySearch(l, pos)
	return slices.Insert(l, i, pos)
}

func deleteSorted(l []int, pos int) []int {
	if i, ok := slices.BinarySearch(l, pos); ok {
		return slices.Delete(l, i, i+1)
	}
	return l
}

// touch moves the epoch of every node p's target change concerns.
func (s *state) touch(p *part, n int) {
	s.epoch[n]++
	for _, m := range p.members {
		s.epoch[m]++
	}
}

func (s *state) setLeader(p *part, n int) {
	if p.tleader >= 0 {
		s.lcnt[p.db][p.tleader]--
		s.ltot[p.tleader]--
		s.ledBy[p.db][p.tleader] = deleteSorted(s.ledBy[p.db][p.tleader], p.pos)
	}
	p.tleader = n
	if n >= 0 {
		s.lcnt[p.db][n]++
		s.ltot[n]++
		s.ledBy[p.db][n] = insertSorted(s.ledBy[p.db][n], p.pos)
	}
}

// stable reports whether the target replicas are the current voters
// everywhere: no replica move remains.
func (s *state) stable() bool {
	for _, p := range s.parts {
		if len(p.learners) > 0 || len(p.members) != len(p.voters) {
			return false
		}
		for _, m := range p.members {
			if !p.isVoter(m) {
				return false
			}
		}
	}
	return true
}

// move priorities: lower goes first.
const (
	urgentLeader = iota // partition without a usable leader
	completeMove        // remove a replica whose replacement is in
	repairAdd           // restore the replication factor
	moveAdd             // zones, draining
	balanceAdd          // balance: only while it evens out current loads
	balanceLeader
)

type prioritized struct {
	class    int
	order    int // the partition's position
	move     Move
	db, from int // balanceAdd: the database and the node the replica leaves
}

func (s *state) plan() Plan {
	pl := Plan{Target: make(Placement, len(s.parts)), Create: Placement{}}
	var moves []prioritized
	inflight := 0
	for i, p := range s.parts {
		a := Assignment{Replicas: s.names(p.members)}
		if p.tleader >= 0 {
			a.Leader = s.ids[p.tleader]
		}
		pl.Target[p.id] = a
		if p.fixed {
			pl.Unavailable = append(pl.Unavailable, p.id)
			continue
		}
		if p.isNew {
			if len(p.members) > 0 {
				pl.Create[p.id] = a
			}
			continue
		}
		inflight += len(p.learners)
		emit := func(class int, m Move) {
			m.Partition = p.id
			moves = append(moves, prioritized{class: class, order: i, move: m})
		}
		// Leadership first: a partition must keep a usable leader.
		leaderOK := p.leader >= 0 && s.status[p.leader] == Alive && p.has(p.leader) &&
			(!s.draining[p.leader] || p.tleader == p.leader)
		if p.tleader >= 0 && p.tleader != p.leader {
			from := NodeID("")
			if p.leader >= 0 {
				from = s.ids[p.leader]
			}
			class := balanceLeader
			if !leaderOK {
				class = urgentLeader
			}
			emit(class, Move{Kind: TransferLeader, From: from, To: s.ids[p.tleader]})
		}
		complete := true // every target replica is a caught-up voter
		for _, m := range p.members {
			complete = complete && p.isVoter(m)
		}
		usable := 0 // current replicas that may stay
		for _, v := range slices.Concat(p.voters, p.learners) {
			if s.status[v] != Gone && !s.draining[v] {
				usable++
			}
		}
		from := -1 // the eligible node a balancing move takes the replica from
		for _, v := range slices.Concat(p.voters, p.learners) {
			if s.eligible[v] && !p.has(v) && from < 0 {
				from = v
			}
		}
		for _, m := range p.members {
			if !p.current(m) {
				class := moveAdd
				switch {
				case usable < p.rf:
					class = repairAdd
				case from >= 0 && s.zonesValidAmong(slices.Concat(p.voters, p.learners)):
					class = balanceAdd
				}
				moves = append(moves, prioritized{class, i, Move{Kind: AddReplica, Partition: p.id, To: s.ids[m]}, p.db, from})
			}
		}
		for _, l := range p.learners {
			if !p.has(l) {
				emit(completeMove, Move{Kind: RemoveReplica, From: s.ids[l]})
			}
		}
		for _, v := range p.voters {
			if p.has(v) {
				continue
			}
			if !complete || v == p.leader {
				pl.Pending++ // after the adds complete / the leader moves
				continue
			}
			emit(completeMove, Move{Kind: RemoveReplica, From: s.ids[v]})
		}
	}
	sort.SliceStable(moves, func(i, j int) bool {
		if moves[i].class != moves[j].class {
			return moves[i].class < moves[j].class
		}
		return moves[i].order < moves[j].order
	})
	// A balancing move starts only if it evens out the current loads (two
	// or more apart in its database, or one apart there and two in total).
	// The target is replanned at every call, and with much work pending
	// two plans may disagree on where a replica belongs; moves that each
	// lower the current imbalance cannot go back and forth.
	curCnt, curTot := s.currentLoads()
	evens := func(m prioritized) bool {
		a, b := m.from, s.index[m.move.To]
		dd, dt := curCnt[m.db][a]-curCnt[m.db][b], curTot[a]-curTot[b]
		return dd >= 2 || dd == 1 && dt >= 2
	}
	addBudget := s.opts.MaxMoves - inflight
	// adding counts the replicas being added to each node: learners in
	// flight, then the adds of this plan (Options.MaxMovesPerNode).
	adding := make([]int, len(s.ids))
	for _, p := range s.parts {
		for _, l := range p.learners {
			adding[l]++
		}
	}
	nodeFull := func(m prioritized) bool {
		return s.opts.MaxMovesPerNode > 0 && adding[s.index[m.move.To]] >= s.opts.MaxMovesPerNode
	}
	var held []Move
	for _, m := range moves {
		if len(pl.Moves) == s.opts.MaxMoves {
			pl.Pending++
			continue
		}
		if m.move.Kind == AddReplica {
			if addBudget <= 0 || nodeFull(m) || m.class == balanceAdd && !evens(m) {
				if addBudget > 0 && !nodeFull(m) {
					held = append(held, m.move)
				}
				pl.Pending++
				continue
			}
			addBudget--
			adding[s.index[m.move.To]]++
			if m.class == balanceAdd {
				a, b := m.from, s.index[m.move.To]
				curCnt[m.db][a]--
				curCnt[m.db][b]++
				curTot[a]--
				curTot[b]++
			}
		}
		pl.Moves = append(pl.Moves, m.move)
	}
	// When only uneven-looking balancing is left (the plan evens out loads
	// through a chain of moves, none of which evens them alone), start it
	// one move at a time.
	if len(pl.Moves) == 0 && inflight == 0 && len(held) > 0 {
		pl.Moves = held[:1]
		pl.Pending--
	}
	return pl
}

// currentLoads counts the current replicas (voters and learners) per
// database and in total on each node.
func (s *state) currentLoads() (cnt [][]int, tot []int) {
	cnt = make([][]int, len(s.dbs))
	for d := range cnt {
		cnt[d] = make([]int, len(s.ids))
	}
	tot = make([]int, len(s.ids))
	for _, p := range s.parts {
		for _, n := range slices.Concat(p.voters, p.learners) {
			cnt[p.db][n]++
			tot[n]++
		}
	}
	return cnt, tot
}

func (s *state) names(ns []int) []NodeID {
	out := make([]NodeID, 0, len(ns))
	for _, n := range ns {
		out = append(out, s.ids[n])
	}
	slices.Sort(out)
	return out
}
