package placement

import (
	"fmt"
	"time"
)

// NodeID names a storage node.
type NodeID string

// NodeState is what the failure detector says about a node, with the
// dead-node delay already applied (see StateOf).
type NodeState int

const (
	// Alive nodes hold replicas and take new ones.
	Alive NodeState = iota
	// Down nodes are dead for less than the delay: they keep their replicas
	// (a restart catches up from the log) but lead nothing and take nothing
	// new, as Helix's delayed rebalancer does.
	Down
	// Gone nodes are dead past the delay or removed: their replicas are
	// recreated elsewhere. A node missing from Input.Nodes is Gone.
	Gone
)

func (s NodeState) String() string {
	switch s {
	case Alive:
		return "alive"
	case Down:
		return "down"
	case Gone:
		return "gone"
	}
	return fmt.Sprintf("NodeState(%d)", int(s))
}

// StateOf evaluates the dead-node delay: a live node is Alive, a node dead
// for less than delay is Down, one dead for delay or longer is Gone.
func StateOf(alive bool, deadFor, delay time.Duration) NodeState {
	switch {
	case alive:
		return Alive
	case deadFor < delay:
		return Down
	default:
		return Gone
	}
}

// Node is one storage node as the controller sees it.
type Node struct {
	ID    NodeID
	Zone  string // failure domain (rack, availability zone); "" is a zone too
	State NodeState
	// Draining nodes give away their replicas and leaderships and take
	// nothing new; they keep a replica only while no other node can take it.
	Draining bool
}

// Database is what placement needs of a database: its partition count and
// replication factor.
type Database struct {
	Name       string
	Partitions int // 1 or more; partitions are numbered 0..Partitions-1
	Replicas   int // replication factor, 1..5
}

// PartitionID names one partition of one database.
type PartitionID struct {
	Database string
	Index    int
}

func (p PartitionID) String() string { return fmt.Sprintf("%s/%d", p.Database, p.Index) }

func (p PartitionID) less(o PartitionID) bool {
	if p.Database != o.Database {
		return p.Database < o.Database
	}
	return p.Index < o.Index
}

// Assignment is one partition's replica set.
//
// In Current it is what the partition's replicas report: Replicas are the
// voting, caught-up members of its Raft group, Learners the replicas being
// added (an AddReplica in flight: snapshot streaming or catching up), and
// Leader the Raft leader ("" if none is known). In a Plan it is the goal.
type Assignment struct {
	Replicas []NodeID
	Learners []NodeID
	Leader   NodeID
}

// Placement maps every partition to its assignment. A partition missing from
// a Placement, or present with neither replicas nor learners, does not exist
// yet.
type Placement map[PartitionID]Assignment

// MoveKind says what a Move asks of the replication layer.
type MoveKind int

const (
	// AddReplica adds a replica on To: add a learner, stream a snapshot,
	// catch up, promote to voter. Report it as a learner until promoted.
	AddReplica MoveKind = iota
	// RemoveReplica removes the replica on From from the group.
	RemoveReplica
	// TransferLeader moves leadership from From to To, a caught-up voter.
	// From may be dead or "": then ask To to campaign.
	TransferLeader
)

func (k MoveKind) String() string {
	switch k {
	case AddReplica:
		return "add"
	case RemoveReplica:
		return "remove"
	case TransferLeader:
		return "transfer"
	}
	return fmt.Sprintf("MoveKind(%d)", int(k))
}

// Move is one step towards the target placement.
type Move struct {
	Kind      MoveKind
	Partition PartitionID
	From      NodeID // RemoveReplica, TransferLeader
	To        NodeID // AddReplica, TransferLeader
}

func (m Move) String() string {
	switch m.Kind {
	case AddReplica:
		return fmt.Sprintf("add %s on %s", m.Partition, m.To)
	case RemoveReplica:
		return fmt.Sprintf("remove %s from %s", m.Partition, m.From)
	default:
		return fmt.Sprintf("transfer %s leader %s -> %s", m.Partition, m.From, m.To)
	}
}

// Mode selects the placement strategy.
type Mode int

const (
	// Spread mixes leaders and followers on every node and spreads both
	// evenly: when a node dies its leaderships fail over to many nodes at
	// once. The default.
	Spread Mode = iota
	// ShardedMySQL mimics the sharded-MySQL layout the Espresso paper
	// compares against (its Figure 5): nodes form replica sets of size RF,
	// each set hosts whole shards and one node of each set leads all of
	// them, so a node's partitions are all leaders or all followers. For
	// benchmarks only.
	ShardedMySQL
)

// DefaultMaxMoves is Options.MaxMoves when it is zero.
const DefaultMaxMoves = 16

// Options tune a call of Compute.
type Options struct {
	// MaxMoves bounds the moves in flight: a Plan holds at most MaxMoves
	// moves, and at most MaxMoves minus the learners already in flight
	// AddReplica moves. Zero means DefaultMaxMoves.
	MaxMoves int
	// MaxMovesPerNode bounds the replicas being added to one node at once
	// (learners in flight on it plus new AddReplica moves to it), so that
	// a joining node is not flooded with snapshots. Zero means no bound
	// beyond MaxMoves.
	MaxMovesPerNode int
	Mode            Mode
}

// Input is everything placement looks at.
type Input struct {
	Nodes     []Node
	Databases []Database
	Current   Placement
	// Previous is the Target of the last Plan, if the caller kept it. It
	// carries intent from call to call: when a move's add completes, the
	// replica the move meant to replace is the one removed, so moves finish
	// instead of being undone by a tie broken the other way.
	Previous Placement
	Options  Options
}

// Plan is the answer of Compute.
type Plan struct {
	// Target is where placement is heading, one assignment per partition of
	// Input.Databases (Learners empty). Its leaders are final only once no
	// replica move remains; until then they are the leaders to hold now.
	Target Placement
	// Create holds the partitions that do not exist yet with their initial
	// replicas and leader: create them in one step (bootstrap each Raft
	// group with these voters and let the leader campaign); nothing moves.
	Create Placement
	// Moves are the next steps, most urgent first, at most Options.MaxMoves.
	// Issue them in order; a later call re-plans from what completed.
	Moves []Move
	// Pending is how many moves towards Target are not in Moves (held back
	// by the throttle or waiting for an earlier move to complete).
	Pending int
	// Unavailable lists partitions without a live majority of voters (or
	// with no replica left): Raft cannot change their membership, so
	// placement leaves them alone. They need their nodes back or an
	// operator's recovery.
	Unavailable []PartitionID
}
