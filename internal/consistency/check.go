package consistency

import (
	"context"
	"encoding/json"

	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/peer"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replication"
)

// Ref names one partition of one database.
type Ref struct {
	DB        string
	Partition int
}

// Group is the Raft group of a partition hosted on this node.
type Group interface {
	// Leader reports whether this replica leads, ready for writes.
	Leader() (leader uint64, leading bool)
	// Check runs a check of the group from its leader.
	Check(ctx context.Context, opts replication.CheckOptions) (replication.CheckReport, error)
}

// Cluster is what the checks need of the node and its cluster.
type Cluster interface {
	// Hosted returns this node's replica of partition p of db.
	Hosted(db string, p int) (Group, bool)
	// All yields every partition hosted here.
	All() iter.Seq2[Ref, Group]
	// LeaderAddr returns the node id and peer address (internal/peer) of
	// the partition's published leader.
	LeaderAddr(db string, p int) (id, addr string, ok bool)
	// NodeName returns the node id of a Raft member.
	NodeName(raft uint64) string
}

// Config configures a Checker.
type Config struct {
	// NodeID is this node's id.
	NodeID string
	// Interval is how long after a partition's last check its leader
	// checks it again (0: never in the background).
	Interval time.Duration
	// KV is the cluster's etcd, where outcomes and the epoch are kept
	// under Prefix.
	KV     clientv3.KV
	Prefix string
	// Cluster is the node's view of its replicas and their leaders.
	Cluster Cluster
	// Peers calls the leaders' peer listeners (default plaintext).
	Peers  *peer.Client
	Logger *slog.Logger
}

// Checker runs this node's consistency checks and records their outcomes.
// Its methods are safe for concurrent use.
type Checker struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	status map[Ref]*wire.CheckStatus
	// one serializes the checks this node leads: one partition at a time.
	one chan struct{}
}

// New returns a Checker; Run starts its background loop.
func New(cfg Config) *Checker {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Peers == nil {
		cfg.Peers = peer.NewClient(nil)
	}
	return &Checker{cfg: cfg, log: cfg.Logger, status: map[Ref]*wire.CheckStatus{}, one: make(chan struct{}, 1)}
}

func (c *Checker) get(ref Ref) *wire.CheckStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.status[ref]
	if !ok {
		return nil
	}
	out := *s
	return &out
}

// resultRank orders results from best to worst, for a database's result.
var resultRank = map[string]int{"consistent": 0, "repaired": 1, "incomplete": 2, "failed": 3, "inconsistent": 4}

// run checks ref, led here by g, and records the outcome.
func (c *Checker) run(ctx context.Context, ref Ref, g Group, repair bool) (wire.PartitionCheck, error) {
	select {
	case c.one <- struct{}{}:
	case <-ctx.Done():
		return wire.PartitionCheck{}, problem.New(problem.Unavailable, "another consistency check runs on node %s; none started for %s/%d", c.cfg.NodeID, ref.DB, ref.Partition)
	}
	defer func() { <-c.one }()
	started := time.Now().UTC()
	c.mu.Lock()
	st := c.status[ref]
	if st == nil {
		st = &wire.CheckStatus{}
		c.status[ref] = st
	}
	st.Running, st.Started = true, &started
	c.mu.Unlock()

	rep, err := g.Check(ctx, replication.CheckOptions{Repair: repair})
	c.mu.Lock()
	st.Running, st.Started = false, nil
	c.mu.Unlock()
	if err != nil {
		return wire.PartitionCheck{}, err
	}
	name := c.cfg.Cluster.NodeName
	pc := wire.PartitionCheck{
		Database: ref.DB, Partition: ref.Partition, Leader: name(rep.Leader), Index: rep.Index, SCN: rep.SCN.String(),
		At: rep.At, Keys: rep.Keys, Bytes: rep.Bytes, Result: rep.Result,
	}
	if rep.HandedTo != 0 {
		pc.HandedTo = name(rep.HandedTo)
	}
	for _, rc := range rep.Replicas {
		pc.Replicas = append(pc.Replicas, wire.ReplicaCheckInfo{
			Node: name(rc.Node), Status: rc.Status, Ranges: rc.Ranges, Error: rc.Error,
			Repaired: rc.Repaired, RepairError: rc.RepairError,
		})
	}
	c.mu.Lock()
	st.Last = &pc
	c.mu.Unlock()
	c.record(ctx, pc)
	c.log.Info("consistency check", "db", ref.DB, "partition", ref.Partition, "result", pc.Result, "scn", pc.SCN, "keys", pc.Keys, "bytes", pc.Bytes)
	return pc, nil
}

// checksDir holds each partition's last check outcome (PartitionCheck
// JSON at Prefix+checksDir+"{db}/{partition}"), written by the leader that
// ran the check.
const checksDir = "/checks/"

// record keeps pc, the outcome of a check this node ran as leader, in
// etcd, so that the partition's next leader (after a failover, a transfer
// or this node's restart) still shows it. Best effort: if etcd cannot take
// it within two seconds, the outcome is only in this node's memory.
func (c *Checker) record(ctx context.Context, pc wire.PartitionCheck) {
	b, err := json.Marshal(pc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	key := fmt.Sprintf("%s%s%s/%d", c.cfg.Prefix, checksDir, pc.Database, pc.Partition)
	if _, err := c.cfg.KV.Put(ctx, key, string(b)); err != nil {
		c.log.Warn("consistency check outcome not recorded in etcd", "db", pc.Database, "partition", pc.Partition, "err", err)
	}
}

// Recorded reads every partition's recorded last check outcome (none if
// etcd does not answer within a second).
func (c *Checker) Recorded() map[Ref]wire.PartitionCheck {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := c.cfg.KV.Get(ctx, c.cfg.Prefix+checksDir, clientv3.WithPrefix())
	if err != nil {
		return map[Ref]wire.PartitionCheck{}
	}
	out := make(map[Ref]wire.PartitionCheck, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var pc wire.PartitionCheck
		if json.Unmarshal(kv.Value, &pc) == nil {
			out[Ref{pc.Database, pc.Partition}] = pc
		}
	}
	return out
}

// Last is what /_cluster shows of ref's checks, led here: whether one
// runs here, and the latest outcome, this node's or the recorded one
// (recorded is what Recorded returned); nil if neither is known.
func (c *Checker) Last(ref Ref, recorded map[Ref]wire.PartitionCheck) *wire.CheckStatus {
	st := c.get(ref)
	if rec, ok := recorded[ref]; ok && (st == nil || st.Last == nil || rec.At.After(st.Last.At)) {
		if st == nil {
			st = &wire.CheckStatus{}
		}
		st.Last = &rec
	}
	return st
}

// Partition checks partition p of db here if this node leads it, and
// otherwise (unless local) at the leader's node, following leadership a
// few times.
func (c *Checker) Partition(ctx context.Context, db string, p int, repair, local bool) (wire.PartitionCheck, error) {
	ref := Ref{db, p}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			case <-ctx.Done():
				return wire.PartitionCheck{}, err
			}
		}
		if g, hosted := c.cfg.Cluster.Hosted(db, p); hosted {
			if _, leading := g.Leader(); leading {
				var pc wire.PartitionCheck
				if pc, err = c.run(ctx, ref, g, repair); err == nil {
					if pc.HandedTo == "" || pc.Result == "repaired" || local || attempt == 4 {
						return pc, nil
					}
					// This replica differs from the majority and its
					// rebuild failed; the new leader's check tries again.
					err = problem.New(problem.Unavailable, "partition %s/%d: leadership handed to %s to repair %s", db, p, pc.HandedTo, c.cfg.NodeID)
					continue
				}
				if _, ok := partition.AsNotApplied(err, partition.NotLeader); local || !ok {
					return wire.PartitionCheck{}, err
				}
				continue
			}
		}
		if local {
			return wire.PartitionCheck{}, problem.New(problem.Unavailable, "node %s does not lead %s/%d", c.cfg.NodeID, db, p)
		}
		id, addr, ok := c.cfg.Cluster.LeaderAddr(db, p)
		if !ok || id == c.cfg.NodeID {
			err = &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("no leader of %s/%d is known", db, p)}
			continue
		}
		var pc wire.PartitionCheck
		if pc, err = c.remote(ctx, addr, db, p, repair); err == nil {
			if pc.HandedTo == "" || pc.Result == "repaired" || attempt == 4 {
				return pc, nil
			}
			err = problem.New(problem.Unavailable, "partition %s/%d: leadership handed to %s to repair %s", db, p, pc.HandedTo, pc.Leader)
		}
	}
	return wire.PartitionCheck{}, err
}

// remote asks the node at addr, the partition's leader, to check it.
func (c *Checker) remote(ctx context.Context, addr, db string, p int, repair bool) (wire.PartitionCheck, error) {
	u := c.cfg.Peers.URL(addr, fmt.Sprintf("/_internal/check/%s/%d?repair=%t", url.PathEscape(db), p, repair))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return wire.PartitionCheck{}, err
	}
	req.Header.Set("X-Doppio-Forwarded-By", c.cfg.NodeID)
	resp, err := c.cfg.Peers.Do(req)
	if err != nil {
		return wire.PartitionCheck{}, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("asking the leader of %s/%d at %s to check it: %v", db, p, addr, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return wire.PartitionCheck{}, err
	}
	if resp.StatusCode != http.StatusOK {
		var pb struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(b, &pb)
		return wire.PartitionCheck{}, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("the leader of %s/%d at %s: %s", db, p, addr, pb.Detail)}
	}
	var pc wire.PartitionCheck
	if err := json.Unmarshal(b, &pc); err != nil {
		return wire.PartitionCheck{}, fmt.Errorf("check of %s/%d from %s: %w", db, p, addr, err)
	}
	return pc, nil
}

// Database checks every partition of db, one after another. A partition
// whose check cannot run is reported failed.
func (c *Checker) Database(ctx context.Context, db string, partitions int, repair bool) (wire.DatabaseCheck, error) {
	out := wire.DatabaseCheck{Database: db, Result: "consistent", Partitions: []wire.PartitionCheck{}}
	for p := range partitions {
		pc, err := c.Partition(ctx, db, p, repair, false)
		if err != nil {
			if ctx.Err() != nil {
				return wire.DatabaseCheck{}, err
			}
			pc = wire.PartitionCheck{Database: db, Partition: p, At: time.Now().UTC(), Result: "failed", Error: err.Error()}
		}
		if resultRank[pc.Result] > resultRank[out.Result] {
			out.Result = pc.Result
		}
		out.Partitions = append(out.Partitions, pc)
	}
	return out, nil
}
