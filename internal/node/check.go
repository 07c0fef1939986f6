package node

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/doppio-db/doppio/internal/partition"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/replication"
)

// Consistency checks at the node level: the background loop that checks
// each partition this node leads every Config.CheckInterval, the on-demand
// checks of POST /_cluster/check (run at each partition's leader, through
// POST /_internal/check on its node), the last outcome per partition for
// /_cluster, the metrics, and the restart of a replica its leader rebuilds.
// The check itself is replication.Member.Check.

// PartitionCheck is the outcome of one partition's check.
type PartitionCheck struct {
	Database  string    `json:"database"`
	Partition int       `json:"partition"`
	Leader    string    `json:"leader,omitempty"`
	Index     uint64    `json:"index,omitempty"`
	SCN       string    `json:"scn,omitempty"`
	At        time.Time `json:"at"`
	Keys      uint64    `json:"keys"`
	Bytes     uint64    `json:"bytes"`
	Result    string    `json:"result"`
	// HandedTo: the leader differed from the majority and handed
	// leadership to this node, which rebuilt it (if that failed, the
	// check is run again there).
	HandedTo string             `json:"handedTo,omitempty"`
	Error    string             `json:"error,omitempty"`
	Replicas []ReplicaCheckInfo `json:"replicas,omitempty"`
}

// ReplicaCheckInfo is one replica's outcome in a check.
type ReplicaCheckInfo struct {
	Node        string   `json:"node"`
	Status      string   `json:"status"`
	Ranges      []string `json:"ranges,omitempty"`
	Error       string   `json:"error,omitempty"`
	Repaired    bool     `json:"repaired,omitempty"`
	RepairError string   `json:"repairError,omitempty"`
}

// DatabaseCheck is the outcome of checking every partition of a database.
type DatabaseCheck struct {
	Database   string           `json:"database"`
	Result     string           `json:"result"`
	Partitions []PartitionCheck `json:"partitions"`
}

// CheckStatus is what /_cluster shows of a partition's checks (from its
// leader's node).
type CheckStatus struct {
	Running bool       `json:"running,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	// SummedBytes: of a running check, the bytes the leader has summed of
	// its own replica so far (the last check's bytes say about how many
	// there are).
	SummedBytes uint64          `json:"summedBytes,omitempty"`
	Last        *PartitionCheck `json:"last,omitempty"`
}

// checks is a node's record of the checks it ran as leader.
type checks struct {
	mu     sync.Mutex
	status map[partRef]*CheckStatus
	// one serializes the checks this node leads: one partition at a time.
	one chan struct{}
}

func newChecks() *checks {
	return &checks{status: map[partRef]*CheckStatus{}, one: make(chan struct{}, 1)}
}

func (c *checks) get(ref partRef) *CheckStatus {
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

// runCheck checks ref, led here by g, and records the outcome.
func (n *Node) runCheck(ctx context.Context, ref partRef, g *replication.Member, repair bool) (PartitionCheck, error) {
	select {
	case n.checks.one <- struct{}{}:
	case <-ctx.Done():
		return PartitionCheck{}, problem.New(problem.Unavailable, "another consistency check runs on node %s; none started for %s/%d", n.cfg.ID, ref.db, ref.p)
	}
	defer func() { <-n.checks.one }()
	started := time.Now().UTC()
	n.checks.mu.Lock()
	st := n.checks.status[ref]
	if st == nil {
		st = &CheckStatus{}
		n.checks.status[ref] = st
	}
	st.Running, st.Started = true, &started
	n.checks.mu.Unlock()

	rep, err := g.Check(ctx, replication.CheckOptions{Repair: repair})
	n.checks.mu.Lock()
	st.Running, st.Started = false, nil
	n.checks.mu.Unlock()
	if err != nil {
		return PartitionCheck{}, err
	}
	pc := PartitionCheck{
		Database: ref.db, Partition: ref.p, Leader: n.nodeName(rep.Leader), Index: rep.Index, SCN: rep.SCN.String(),
		At: rep.At, Keys: rep.Keys, Bytes: rep.Bytes, Result: rep.Result,
	}
	if rep.HandedTo != 0 {
		pc.HandedTo = n.nodeName(rep.HandedTo)
	}
	for _, rc := range rep.Replicas {
		pc.Replicas = append(pc.Replicas, ReplicaCheckInfo{
			Node: n.nodeName(rc.Node), Status: rc.Status, Ranges: rc.Ranges, Error: rc.Error,
			Repaired: rc.Repaired, RepairError: rc.RepairError,
		})
	}
	n.checks.mu.Lock()
	st.Last = &pc
	n.checks.mu.Unlock()
	n.recordCheck(ctx, pc)
	n.log.Info("consistency check", "db", ref.db, "partition", ref.p, "result", pc.Result, "scn", pc.SCN, "keys", pc.Keys, "bytes", pc.Bytes)
	return pc, nil
}

// checksPrefix holds each partition's last check outcome (PartitionCheck
// JSON at checksPrefix+"{db}/{partition}"), written by the leader that ran
// the check.
const checksPrefix = etcdPrefix + "/checks/"

// recordCheck keeps pc, the outcome of a check this node ran as leader, in
// etcd, so that the partition's next leader (after a failover, a transfer
// or this node's restart) still shows it. Best effort: if etcd cannot take
// it within two seconds, the outcome is only in this node's memory.
func (n *Node) recordCheck(ctx context.Context, pc PartitionCheck) {
	b, err := json.Marshal(pc)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	key := fmt.Sprintf("%s%s/%d", checksPrefix, pc.Database, pc.Partition)
	if _, err := n.client.Put(ctx, key, string(b)); err != nil {
		n.log.Warn("consistency check outcome not recorded in etcd", "db", pc.Database, "partition", pc.Partition, "err", err)
	}
}

// recordedChecks reads every partition's recorded last check outcome
// (none if etcd does not answer within a second).
func (n *Node) recordedChecks() map[partRef]PartitionCheck {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := n.client.Get(ctx, checksPrefix, clientv3.WithPrefix())
	if err != nil {
		return map[partRef]PartitionCheck{}
	}
	out := make(map[partRef]PartitionCheck, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var pc PartitionCheck
		if json.Unmarshal(kv.Value, &pc) == nil {
			out[partRef{pc.Database, pc.Partition}] = pc
		}
	}
	return out
}

// lastCheck is what /_cluster shows of ref's checks, led here: whether one
// runs here, and the latest outcome, this node's or the recorded one.
func (n *Node) lastCheck(ref partRef, recorded map[partRef]PartitionCheck) *CheckStatus {
	st := n.checks.get(ref)
	if rec, ok := recorded[ref]; ok && (st == nil || st.Last == nil || rec.At.After(st.Last.At)) {
		if st == nil {
			st = &CheckStatus{}
		}
		st.Last = &rec
	}
	return st
}

// CheckPartition implements api.Checker: it runs the check here if this
// node leads the partition, and otherwise (unless local) at the leader's
// node, following leadership a few times.
func (c clusterView) CheckPartition(ctx context.Context, db string, p int, repair, local bool) (any, error) {
	return c.n.checkPartition(ctx, db, p, repair, local)
}

func (n *Node) checkPartition(ctx context.Context, db string, p int, repair, local bool) (PartitionCheck, error) {
	ref := partRef{db, p}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			case <-ctx.Done():
				return PartitionCheck{}, err
			}
		}
		if _, g, hosted := n.router.Hosted(db, p); hosted {
			if _, leading := g.Leader(); leading {
				var pc PartitionCheck
				if pc, err = n.runCheck(ctx, ref, g, repair); err == nil {
					if pc.HandedTo == "" || pc.Result == "repaired" || local || attempt == 4 {
						return pc, nil
					}
					// This replica differs from the majority and its
					// rebuild failed; the new leader's check tries again.
					err = problem.New(problem.Unavailable, "partition %s/%d: leadership handed to %s to repair %s", db, p, pc.HandedTo, n.cfg.ID)
					continue
				}
				if _, ok := partition.AsNotApplied(err, partition.NotLeader); local || !ok {
					return PartitionCheck{}, err
				}
				continue
			}
		}
		if local {
			return PartitionCheck{}, problem.New(problem.Unavailable, "node %s does not lead %s/%d", n.cfg.ID, db, p)
		}
		id, _, ok := n.view.Leader(db, p)
		nd, known := n.view.Node(id)
		if !ok || !known || id == n.cfg.ID {
			err = &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("no leader of %s/%d is known", db, p)}
			continue
		}
		var pc PartitionCheck
		if pc, err = n.remoteCheck(ctx, nd.HTTP, db, p, repair); err == nil {
			if pc.HandedTo == "" || pc.Result == "repaired" || attempt == 4 {
				return pc, nil
			}
			err = problem.New(problem.Unavailable, "partition %s/%d: leadership handed to %s to repair %s", db, p, pc.HandedTo, pc.Leader)
		}
	}
	return PartitionCheck{}, err
}

// remoteCheck asks the node at addr, the partition's leader, to check it.
func (n *Node) remoteCheck(ctx context.Context, addr, db string, p int, repair bool) (PartitionCheck, error) {
	u := fmt.Sprintf("http://%s/_internal/check/%s/%d?repair=%t", addr, url.PathEscape(db), p, repair)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return PartitionCheck{}, err
	}
	req.Header.Set("X-Doppio-Forwarded-By", n.cfg.ID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return PartitionCheck{}, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("asking the leader of %s/%d at %s to check it: %v", db, p, addr, err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return PartitionCheck{}, err
	}
	if resp.StatusCode != http.StatusOK {
		var pb struct {
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(b, &pb)
		return PartitionCheck{}, &problem.Error{Kind: problem.Unavailable, Operation: -1, RetryAfter: 1, Detail: fmt.Sprintf("the leader of %s/%d at %s: %s", db, p, addr, pb.Detail)}
	}
	var pc PartitionCheck
	if err := json.Unmarshal(b, &pc); err != nil {
		return PartitionCheck{}, fmt.Errorf("check of %s/%d from %s: %w", db, p, addr, err)
	}
	return pc, nil
}

// CheckDatabase implements api.Checker: every partition, one after
// another. A partition whose check cannot run is reported failed.
func (c clusterView) CheckDatabase(ctx context.Context, db string, partitions int, repair bool) (any, error) {
	return c.n.checkDatabase(ctx, db, partitions, repair)
}

func (n *Node) checkDatabase(ctx context.Context, db string, partitions int, repair bool) (DatabaseCheck, error) {
	out := DatabaseCheck{Database: db, Result: "consistent", Partitions: []PartitionCheck{}}
	for p := range partitions {
		pc, err := n.checkPartition(ctx, db, p, repair, false)
		if err != nil {
			if ctx.Err() != nil {
				return DatabaseCheck{}, err
			}
			pc = PartitionCheck{Database: db, Partition: p, At: time.Now().UTC(), Result: "failed", Error: err.Error()}
		}
		if resultRank[pc.Result] > resultRank[out.Result] {
			out.Result = pc.Result
		}
		out.Partitions = append(out.Partitions, pc)
	}
	return out, nil
}

// checkLoop checks each partition this node leads once its last check is
// Config.CheckInterval old (never when the interval is zero), repairing
// what differs. The last check is the latest of this node's and the one
// recorded in etcd by whichever leader ran it, and a partition never
// checked counts from the cluster's check epoch (checksEpoch), so neither
// a restart nor a change of leader postpones a partition's check: with a
// node-local timer, a node restarted more often than the interval (a
// deploy a day against the default 6 h) never checked anything. A check
// that fails to run is tried again an interval later, as one that ran.
func (n *Node) checkLoop() {
	defer n.wg.Done()
	interval := n.cfg.CheckInterval
	if interval <= 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-n.stop
		cancel()
	}()
	t := time.NewTicker(min(max(interval/10, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	epoch, _ := n.checksEpoch(ctx)   // zero if etcd does not answer: tried again below
	tried := map[partRef]time.Time{} // failed attempts, by this loop
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		if epoch.IsZero() {
			var err error
			if epoch, err = n.checksEpoch(ctx); err != nil {
				continue // nothing is known to be due
			}
		}
		var recorded map[partRef]PartitionCheck
		for ref, g := range n.hosted() {
			if _, leading := g.Leader(); !leading {
				continue
			}
			if recorded == nil { // read once, and only if this node leads
				recorded = n.recordedChecks()
			}
			last := later(epoch, tried[ref])
			if st := n.lastCheck(ref, recorded); st != nil && st.Last != nil {
				last = later(last, st.Last.At)
			}
			if time.Since(last) < interval {
				continue
			}
			pc, err := n.runCheck(ctx, ref, g, true)
			if err == nil && pc.HandedTo != "" && pc.Result != "repaired" {
				// This replica was the odd one out and is not rebuilt
				// yet: the new leader's check tries again.
				_, err = n.checkPartition(ctx, ref.db, ref.p, true, false)
			}
			if err != nil {
				tried[ref] = time.Now()
				if ctx.Err() == nil {
					n.log.Warn("consistency check failed to run", "db", ref.db, "partition", ref.p, "err", err)
				}
			}
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// checksEpochKey holds when the cluster's background checks began (RFC
// 3339): the first check loop to run writes it, and a partition never
// checked is due an interval after it.
const checksEpochKey = etcdPrefix + "/checks-epoch"

// checksEpoch reads the cluster's check epoch, writing it (now) if no
// node has yet.
func (n *Node) checksEpoch(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	resp, err := n.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(checksEpochKey), "=", 0)).
		Then(clientv3.OpPut(checksEpochKey, now)).
		Else(clientv3.OpGet(checksEpochKey)).
		Commit()
	if err != nil {
		return time.Time{}, err
	}
	v := now
	if !resp.Succeeded {
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 1 {
			v = string(kvs[0].Value)
		}
	}
	return time.Parse(time.RFC3339Nano, v)
}

// rebuildReplica restarts this node's replica of p empty, on its leader's
// word (replication.Config.OnRebuild): the router drops the old replica
// and opens the new one; the leader sends it a snapshot.
func (n *Node) rebuildReplica(ctx context.Context, p keys.Partition) error {
	v, ok := n.parts.Load(string(p))
	if !ok {
		return fmt.Errorf("partition %x is not hosted on node %s", []byte(p), n.cfg.ID)
	}
	ref := v.(partRef)
	// The reconcile pass must not start the replica meanwhile (it could
	// bootstrap it from the initial placement).
	n.rebuildingHere.Store(ref, struct{}{})
	defer n.rebuildingHere.Delete(ref)
	n.log.Warn("rebuilding replica from a snapshot (its leader found it inconsistent)", "db", ref.db, "partition", ref.p)
	n.router.Drop(ref.db, ref.p)
	g, err := n.host.StartRebuilt(p)
	if err != nil {
		return err
	}
	_, err = n.router.Open(ref.db, ref.p, g)
	return err
}

// checkCollector exports the consistency-check counters.
type checkCollector struct {
	n                                  *Node
	checks, mismatches, repairs, bytes *prometheus.Desc
}

func newCheckCollector(n *Node) *checkCollector {
	return &checkCollector{
		n:          n,
		checks:     prometheus.NewDesc("doppio_consistency_checks_total", "Consistency checks this node ran as a partition's leader.", nil, nil),
		mismatches: prometheus.NewDesc("doppio_consistency_mismatches_total", "Replicas consistency checks found to differ from their leader (or from the majority, when the leader was the odd one out).", nil, nil),
		repairs:    prometheus.NewDesc("doppio_consistency_repairs_total", "Replicas rebuilt from a snapshot after a consistency check found them differing.", nil, nil),
		bytes:      prometheus.NewDesc("doppio_consistency_checked_bytes_total", "Key and value bytes this node summed for consistency checks.", nil, nil),
	}
}

func (c *checkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.checks
	ch <- c.mismatches
	ch <- c.repairs
	ch <- c.bytes
}

func (c *checkCollector) Collect(ch chan<- prometheus.Metric) {
	if c.n.host == nil {
		return
	}
	cc := c.n.host.CheckCounters()
	ch <- prometheus.MustNewConstMetric(c.checks, prometheus.CounterValue, float64(cc.Checks))
	ch <- prometheus.MustNewConstMetric(c.mismatches, prometheus.CounterValue, float64(cc.Mismatches))
	ch <- prometheus.MustNewConstMetric(c.repairs, prometheus.CounterValue, float64(cc.Repairs))
	ch <- prometheus.MustNewConstMetric(c.bytes, prometheus.CounterValue, float64(cc.Bytes))
}
