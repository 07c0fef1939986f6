package wire

import "time"

// ClusterInfo is the body of GET /_cluster.
type ClusterInfo struct {
	// Controller is the node id of the active placement controller, ""
	// while none is elected.
	Controller string          `json:"controller"`
	Nodes      []NodeInfo      `json:"nodes"`
	Partitions []PartitionInfo `json:"partitions"`
	// Rebalance is the controller's progress moving replicas towards its
	// target placement (absent before the first report).
	Rebalance *Rebalance `json:"rebalance,omitempty"`
	// Transfers are the partition backups and restore steps running on
	// the nodes now (doppio backup / doppio restore).
	Transfers []TransferInfo `json:"transfers"`
	// Loads are the bulk loads not yet ended, with their totals.
	Loads []Load `json:"loads,omitempty"`
	// Derived are the derived tables with their versions.
	Derived []DerivedTable `json:"derived,omitempty"`
	// Cache is the cache tier: tables, read sides, updaters.
	Cache *CacheInfo `json:"cache,omitempty"`
	// Insecure: the node that answered runs without TLS (no certs
	// directory), by its operator's explicit choice off loopback.
	Insecure bool `json:"insecure"`
	// MixedVersions: the live nodes do not all run the same version.
	MixedVersions bool `json:"mixedVersions,omitempty"`
	// Next is the cursor of the next page of Partitions when the request
	// gave a limit and more remain ("" on the last page).
	Next string `json:"next,omitempty"`
}

// NodeInfo describes one node in /_cluster.
type NodeInfo struct {
	ID      string     `json:"id"`
	HTTP    string     `json:"http"`
	GRPC    string     `json:"grpc,omitempty"`
	Zone    string     `json:"zone"`
	State   string     `json:"state"` // alive, or dead (placed replicas but no registration)
	Started *time.Time `json:"started,omitempty"`
	Version string     `json:"version,omitempty"` // the Doppio version it runs ("" when dead)
	Leads   int        `json:"leads"`             // partitions it leads
	Follows int        `json:"follows"`           // partitions it holds a non-leading replica of
	// Intent is what the operator wants of the node: active, standby,
	// draining or removed (`doppio cluster add|drain|remove`).
	Intent string `json:"intent"`
}

// PartitionInfo describes one partition in /_cluster.
type PartitionInfo struct {
	Database  string        `json:"database"`
	Partition int           `json:"partition"`
	Leader    string        `json:"leader"` // "" when none is known
	Term      uint64        `json:"term"`
	Replicas  []string      `json:"replicas"` // placement
	SCN       string        `json:"scn"`      // leader's applied SCN
	Members   []ReplicaInfo `json:"members"`  // Raft members as their nodes report them
	// Check is the leader's record of the partition's consistency checks.
	Check *CheckStatus `json:"check,omitempty"`
}

// ReplicaInfo is one replica of a partition in /_cluster.
type ReplicaInfo struct {
	Node    string `json:"node"`
	Role    string `json:"role"` // leader, follower, learner, candidate, … or unknown (node not answering)
	SCN     string `json:"scn,omitempty"`
	Applied uint64 `json:"appliedIndex"`
	// Lag is how many log entries the leader has that this replica is not
	// known to hold (the leader's view); absent when no leader answers.
	Lag *uint64 `json:"lag,omitempty"`
}

// Rebalance is the active controller's progress towards its target
// placement since the current rebalance began (the first planning round
// with moves to make after one without).
type Rebalance struct {
	// Controller is the node id of the controller that wrote this.
	Controller string `json:"controller"`
	// Active: moves remain. Started is when the rebalance began, Finished
	// when the last one completed (zero while active).
	Active   bool       `json:"active"`
	Started  *time.Time `json:"started,omitempty"`
	Finished *time.Time `json:"finished,omitempty"`
	// Total is the moves of this rebalance so far: Done plus Remaining
	// (Remaining = InFlight + the moves not started yet). It grows when
	// the target changes during the rebalance (a node dies, another is
	// added).
	Total     int `json:"total"`
	Done      int `json:"done"`
	Remaining int `json:"remaining"`
	InFlight  int `json:"inFlight"`
	// Moving lists the replica adds in flight ("db/partition -> node").
	Moving []string `json:"moving,omitempty"`
	// Limits in force: moves in flight cluster-wide and per node.
	MaxMoves        int `json:"maxMoves"`
	MaxMovesPerNode int `json:"maxMovesPerNode,omitempty"`
}

// Progress is the fraction of the rebalance's moves done, 1 when none
// remain.
func (r Rebalance) Progress() float64 {
	if r.Total == 0 || r.Remaining == 0 {
		return 1
	}
	return float64(r.Done) / float64(r.Total)
}

// Transfer is one partition backup or restore step running on a node.
type Transfer struct {
	Kind      string    `json:"kind"` // "backup" or "restore"
	DB        string    `json:"db"`
	Partition int       `json:"partition"`
	Session   string    `json:"session,omitempty"`
	Bytes     int64     `json:"bytes"`
	Started   time.Time `json:"started"`
}

// TransferInfo is one running partition backup or restore step in
// /_cluster: the node serving it, what and how many bytes so far.
type TransferInfo struct {
	Node string `json:"node"`
	Transfer
}

// LocalInfo is the body of GET /_internal/replicas: one node's report of
// the replicas it hosts, from which another node assembles /_cluster.
type LocalInfo struct {
	Node      string         `json:"node"`
	Replicas  []LocalReplica `json:"replicas"`
	Transfers []Transfer     `json:"transfers,omitempty"`
	// Cache is the node's read side of the cache tier, if it runs one.
	Cache *CacheProcess `json:"cache,omitempty"`
}

// LocalReplica is one replica hosted on a node, as GET
// /_internal/replicas answers it.
type LocalReplica struct {
	Database  string                    `json:"database"`
	Partition int                       `json:"partition"`
	Role      string                    `json:"role"`
	Leader    string                    `json:"leader"`
	Term      uint64                    `json:"term"`
	SCN       string                    `json:"scn"`
	Applied   uint64                    `json:"appliedIndex"`
	Voters    []string                  `json:"voters"`
	Learners  []string                  `json:"learners"`
	Followers map[string]FollowerReport `json:"followers,omitempty"`
	Check     *CheckStatus              `json:"check,omitempty"` // on the leader
}

// FollowerReport is a leader's view of one follower.
type FollowerReport struct {
	Match  uint64 `json:"match"`
	Lag    uint64 `json:"lag"`
	State  string `json:"state"`
	Active bool   `json:"active"`
}
