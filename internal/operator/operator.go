package operator

import (
	"context"
	"iter"
	"log/slog"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is the membership view the operator decides from: the live
// nodes, the placements and the Raft configurations their leaders report
// (*membership.View).
type Cluster interface {
	Nodes() []membership.Node
	Node(id string) (membership.Node, bool)
	NodeByRaft(raft uint64) (membership.Node, bool)
	Placements() map[string]membership.PlacementRecord
	Groups() map[string]membership.Groups
}

// Databases lists the databases of the schema catalog (*catalog.Catalog).
type Databases interface {
	Databases() []schema.Database
}

// Registration is this node's entry in the cluster
// (*membership.Registration).
type Registration interface {
	// Leave marks the node leaving: no peer hands it a leadership.
	Leave(ctx context.Context) error
	// Close revokes the registration: routers and peers see the node gone.
	Close() error
}

// Replica is a Raft group hosted here (*replication.Group).
type Replica interface {
	Status() (replication.Status, error)
	TransferLeadership(ctx context.Context, to uint64) error
}

// Server is the API server of this node (*api.Server).
type Server interface {
	// Drain makes every answer from now on close its connection.
	Drain()
}

// Config is what an Operator reads and acts on. Every field is required.
type Config struct {
	// Self is this node's Raft id.
	Self uint64
	// Client and Prefix locate the intents in etcd.
	Client    *clientv3.Client
	Prefix    string
	Cluster   Cluster
	Databases Databases
	// Registration is this node's, left on hand-off and closed on drain.
	Registration Registration
	// Hosted yields the Raft groups hosted here with their partition
	// number (by which leaderships are spread among successors).
	Hosted func() iter.Seq2[int, Replica]
	Server Server
	Logger *slog.Logger
}

// Operator applies operator intents and stops a node gracefully.
type Operator struct {
	cfg Config
}

// New returns an Operator acting through cfg.
func New(cfg Config) *Operator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Operator{cfg: cfg}
}
