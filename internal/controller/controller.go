package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/placement"
)

// DefaultDeadNodeDelay is Options.DeadNodeDelay when it is zero: how long a
// node may stay dead before its replicas are recreated elsewhere. Long
// enough for a restart or a reboot to catch up from the log instead of
// copying whole partitions.
const DefaultDeadNodeDelay = 3 * time.Minute

// DefaultMaxMovesPerNode is Options.MaxMovesPerNode when it is zero: a
// joining node receives at most this many snapshots at once.
const DefaultMaxMovesPerNode = 4

// DefaultSessionTTL is Options.SessionTTL when it is zero.
const DefaultSessionTTL = 2 * time.Second

// electionDir is the election's key prefix under Options.Prefix.
const electionDir = "/controller"

// Options configure the controller.
type Options struct {
	// Prefix is the cluster's etcd prefix (default "/doppio"), where the
	// catalog and internal/membership keep their keys.
	Prefix string
	// DeadNodeDelay is how long a node may be dead before its replicas are
	// recreated on other nodes (default DefaultDeadNodeDelay).
	DeadNodeDelay time.Duration
	// MaxMoves bounds the moves in flight (default
	// placement.DefaultMaxMoves).
	MaxMoves int
	// MaxMovesPerNode bounds the replicas being added to one node at once
	// (default DefaultMaxMovesPerNode).
	MaxMovesPerNode int
	// Mode is the placement strategy (default placement.Spread).
	Mode placement.Mode
	// SessionTTL is the election lease: how long a dead active controller
	// holds the role (default DefaultSessionTTL; etcd rounds it up to whole
	// seconds).
	SessionTTL time.Duration
	Logger     *slog.Logger
	// OnProgress, if set, is told the rebalance progress after every
	// planning round in which it changed, while this node is the active
	// controller (for metrics).
	OnProgress func(membership.Rebalance)
	// OnActive, if set, is told true when this node becomes the active
	// controller and false when it stops being it (for metrics).
	OnActive func(active bool)

	// onRound, for tests, is told after each planning round the placement
	// it started from and how many etcd writes it made: a test waits for
	// a round that saw a state, rather than sleeping, to check what the
	// controller did not do.
	onRound func(current placement.Placement, writes int)
}

func (o Options) withDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = "/doppio"
	}
	if o.DeadNodeDelay <= 0 {
		o.DeadNodeDelay = DefaultDeadNodeDelay
	}
	if o.MaxMoves <= 0 {
		o.MaxMoves = placement.DefaultMaxMoves
	}
	if o.MaxMovesPerNode <= 0 {
		o.MaxMovesPerNode = DefaultMaxMovesPerNode
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// ParseMode reads a placement mode's name: "spread" or "sharded-mysql".
func ParseMode(s string) (placement.Mode, error) {
	switch s {
	case "", "spread":
		return placement.Spread, nil
	case "sharded-mysql":
		return placement.ShardedMySQL, nil
	}
	return 0, fmt.Errorf("unknown placement mode %q (want spread or sharded-mysql)", s)
}

// Run takes part in the controller election as nodeID until ctx ends, and
// drives placement while it is the active controller. At most one Run of
// a cluster is active at a time; when the active one stops (ctx ends, its
// process dies, it loses etcd), another takes over. Run returns ctx's error
// once ctx ends, after resigning.
func Run(ctx context.Context, cli *clientv3.Client, nodeID string, opts Options) error {
	opts = opts.withDefaults()
	log := opts.Logger.With("component", "controller", "node", nodeID)
	for {
		err := term(ctx, cli, nodeID, opts, log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		log.Warn("controller stopped; campaigning again", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// term is one session: campaign, then drive placement until the session
// or ctx ends.
func term(ctx context.Context, cli *clientv3.Client, nodeID string, opts Options, log *slog.Logger) error {
	ttl := int((opts.SessionTTL + time.Second - 1) / time.Second)
	// The session outlives ctx so that Close can revoke its lease: the
	// next controller then takes over at once instead of after the TTL.
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return fmt.Errorf("election session: %w", err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	e := concurrency.NewElection(s, opts.Prefix+electionDir)
	if err := e.Campaign(ctx, nodeID); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	if opts.OnActive != nil {
		opts.OnActive(true)
		defer opts.OnActive(false)
	}
	log.Info("controller active", "dead_node_delay", opts.DeadNodeDelay, "max_moves", opts.MaxMoves, "max_moves_per_node", opts.MaxMovesPerNode, "mode", modeName(opts.Mode))
	d, err := newDriver(ctx, cli, nodeID, e, opts, log)
	if err != nil {
		return err
	}
	defer d.close()
	return d.run(ctx)
}

// Active returns the node id of the active controller, or "" when none is
// elected.
func Active(ctx context.Context, cli *clientv3.Client, prefix string) (string, error) {
	if prefix == "" {
		prefix = "/doppio"
	}
	resp, err := cli.Get(ctx, prefix+electionDir+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", err
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}

func modeName(m placement.Mode) string {
	if m == placement.ShardedMySQL {
		return "sharded-mysql"
	}
	return "spread"
}
