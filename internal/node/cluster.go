package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/client/wire"

	dto "github.com/prometheus/client_model/go"

	"github.com/doppio-db/doppio/internal/api"
	"github.com/doppio-db/doppio/internal/consistency"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// clusterView answers /_cluster and /_internal/replicas for the API.
type clusterView struct{ n *Node }

func (c clusterView) Local() wire.LocalInfo { return c.n.local() }

func (c clusterView) Info(ctx context.Context) (wire.ClusterInfo, error) {
	return c.n.clusterInfo(ctx), nil
}

// directory is the router's view of other nodes.
type directory struct{ v *membership.View }

func (d directory) RoutedLeader(db string, p int) (string, string, bool) {
	id, _, ok := d.v.Leader(db, p)
	if !ok {
		return "", "", false
	}
	nd, ok := d.v.Node(id)
	return id, nd.HTTP, ok
}

func (d directory) NodeByRaft(raft uint64) (string, string, bool) {
	nd, ok := d.v.NodeByRaft(raft)
	return nd.ID, nd.HTTP, ok
}

// local reports every replica hosted here with its Raft status.
func (n *Node) local() wire.LocalInfo {
	out := wire.LocalInfo{Node: n.cfg.ID, Replicas: []wire.LocalReplica{}}
	if n.api != nil {
		out.Transfers = n.api.Transfers()
	}
	if n.router == nil {
		return out
	}
	var recorded map[consistency.Ref]wire.PartitionCheck
	for ref, g := range n.hosted() {
		st, err := g.Status()
		if err != nil {
			continue
		}
		lr := wire.LocalReplica{
			Database: ref.db, Partition: ref.p, Role: st.Role.String(), Term: st.Term,
			SCN: st.Applied.String(), Applied: st.AppliedIndex,
		}
		if st.Leader != 0 {
			lr.Leader = n.nodeName(st.Leader)
		}
		for _, v := range st.Voters {
			lr.Voters = append(lr.Voters, n.nodeName(v))
		}
		for _, l := range st.Learners {
			lr.Learners = append(lr.Learners, n.nodeName(l))
		}
		if st.Role == replication.RoleLeader {
			if recorded == nil { // read once, and only if this node leads
				recorded = n.checks.Recorded()
			}
			lr.Check = n.checks.Last(consistency.Ref{DB: ref.db, Partition: ref.p}, recorded)
			if summing, b := g.CheckProgress(); summing && lr.Check != nil {
				lr.Check.SummedBytes = b
			}
		}
		if len(st.Followers) > 0 {
			lr.Followers = map[string]wire.FollowerReport{}
			for id, f := range st.Followers {
				lr.Followers[n.nodeName(id)] = wire.FollowerReport{Match: f.Match, Lag: f.Lag, State: f.State, Active: f.Active}
			}
		}
		out.Replicas = append(out.Replicas, lr)
	}
	return out
}

// clusterInfo gathers every live node's replicas (each node answers for
// its own; unreachable nodes are left out) and joins them with the
// placement.
func (n *Node) clusterInfo(ctx context.Context) wire.ClusterInfo {
	info := wire.ClusterInfo{Nodes: []wire.NodeInfo{}, Partitions: []wire.PartitionInfo{}, Transfers: []wire.TransferInfo{}}
	if n.view == nil {
		info.Nodes = append(info.Nodes, wire.NodeInfo{ID: n.cfg.ID, HTTP: n.Addr(), State: "starting"})
		return info
	}
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	info.Controller, _ = n.ActiveController(cctx)
	if r, ok, err := membership.ReadRebalance(cctx, n.client, etcdPrefix); err == nil && ok {
		info.Rebalance = &r
	}
	cancel()
	nodes := n.view.Nodes()
	reports := make([]wire.LocalInfo, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		if nd.ID == n.cfg.ID {
			reports[i] = n.local()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], _ = n.fetchLocal(ctx, nd)
		}()
	}
	wg.Wait()

	type key struct {
		db string
		p  int
	}
	type reported struct {
		node string
		wire.LocalReplica
	}
	byPart := map[key][]reported{}
	leads, follows := map[string]int{}, map[string]int{}
	for _, r := range reports {
		for _, tr := range r.Transfers {
			info.Transfers = append(info.Transfers, wire.TransferInfo{Node: r.Node, Transfer: tr})
		}
		for _, lr := range r.Replicas {
			k := key{lr.Database, lr.Partition}
			byPart[k] = append(byPart[k], reported{r.Node, lr})
			if lr.Role == "leader" {
				leads[r.Node]++
			} else {
				follows[r.Node]++
			}
		}
	}
	known := map[string]bool{}
	for _, nd := range nodes {
		started := nd.Started
		known[nd.ID] = true
		info.Nodes = append(info.Nodes, wire.NodeInfo{
			ID: nd.ID, HTTP: nd.HTTP, GRPC: nd.GRPC, Zone: nd.Zone, State: "alive", Started: &started, Intent: string(n.view.Intent(nd.ID).State),
			Leads: leads[nd.ID], Follows: follows[nd.ID],
		})
	}
	placements := n.view.Placements()
	for db, rec := range placements {
		for p, pp := range rec.Partitions {
			for _, r := range pp.Replicas {
				if !known[r] {
					known[r] = true
					info.Nodes = append(info.Nodes, wire.NodeInfo{ID: r, State: "dead", Intent: string(n.view.Intent(r).State)})
				}
			}
			pi := wire.PartitionInfo{Database: db, Partition: p, Replicas: slices.Clone(pp.Replicas), Members: []wire.ReplicaInfo{}}
			reps := byPart[key{db, p}]
			var leader *wire.LocalReplica
			for i := range reps {
				if reps[i].Role == "leader" && (leader == nil || reps[i].Term > leader.Term) {
					leader = &reps[i].LocalReplica
				}
			}
			if leader != nil {
				pi.Leader, pi.Term, pi.SCN = leader.Leader, leader.Term, leader.SCN
				pi.Check = leader.Check
			}
			seen := map[string]bool{}
			for _, lr := range reps {
				node := lr.node
				seen[node] = true
				ri := wire.ReplicaInfo{Node: node, Role: lr.Role, SCN: lr.SCN, Applied: lr.Applied}
				if leader != nil {
					var lag uint64
					if f, ok := leader.Followers[node]; ok {
						lag = f.Lag
					}
					ri.Lag = &lag
				}
				pi.Members = append(pi.Members, ri)
				if pi.Term < lr.Term && leader == nil {
					pi.Term = lr.Term
				}
			}
			if leader != nil {
				for _, v := range append(slices.Clone(leader.Voters), leader.Learners...) {
					if seen[v] {
						continue
					}
					ri := wire.ReplicaInfo{Node: v, Role: "unknown"}
					if f, ok := leader.Followers[v]; ok {
						lag := f.Lag
						ri.Lag = &lag
					}
					pi.Members = append(pi.Members, ri)
				}
			}
			slices.SortFunc(pi.Members, func(a, b wire.ReplicaInfo) int { return strings.Compare(a.Node, b.Node) })
			info.Partitions = append(info.Partitions, pi)
		}
	}
	slices.SortFunc(info.Nodes, func(a, b wire.NodeInfo) int { return strings.Compare(a.ID, b.ID) })
	sort.Slice(info.Partitions, func(i, j int) bool {
		a, b := info.Partitions[i], info.Partitions[j]
		if a.Database != b.Database {
			return a.Database < b.Database
		}
		return a.Partition < b.Partition
	})
	return info
}

// fetchLocal asks another node for its replicas.
func (n *Node) fetchLocal(ctx context.Context, nd membership.Node) (wire.LocalInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.HTTP+"/_internal/replicas", nil)
	if err != nil {
		return wire.LocalInfo{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return wire.LocalInfo{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return wire.LocalInfo{}, fmt.Errorf("node %s: status %d", nd.ID, resp.StatusCode)
	}
	var li wire.LocalInfo
	err = json.NewDecoder(resp.Body).Decode(&li)
	li.Node = nd.ID
	return li, err
}

func uintString(v uint64) string { return strconv.FormatUint(v, 10) }

// collector exports storage and partition state at scrape time.
type collector struct {
	n          *Node
	applied    *prometheus.Desc
	diskBytes  *prometheus.Desc
	walBytes   *prometheus.Desc
	compaction *prometheus.Desc
	compacting *prometheus.Desc
	debt       *prometheus.Desc
	snapshots  *prometheus.Desc
	snapBytes  *prometheus.Desc
	rowHits    *prometheus.Desc
	rowMisses  *prometheus.Desc
	rowBytes   *prometheus.Desc
	reads      *prometheus.Desc
	walSync    *prometheus.Desc
	folds      *prometheus.Desc
	folded     *prometheus.Desc
	purged     *prometheus.Desc
}

func newCollector(n *Node) *collector {
	return &collector{
		n:          n,
		applied:    prometheus.NewDesc("doppio_partition_applied_sequence", "Sequence of the last applied SCN of each hosted partition.", []string{"database", "partition"}, nil),
		diskBytes:  prometheus.NewDesc("doppio_storage_disk_bytes", "Bytes the storage engine uses on disk.", nil, nil),
		walBytes:   prometheus.NewDesc("doppio_storage_wal_bytes", "Bytes written to the write-ahead log.", nil, nil),
		compaction: prometheus.NewDesc("doppio_storage_compactions_total", "Compactions the storage engine ran.", nil, nil),
		compacting: prometheus.NewDesc("doppio_storage_compactions_in_progress", "Compactions the storage engine is running now.", nil, nil),
		debt:       prometheus.NewDesc("doppio_storage_compaction_debt_bytes", "Bytes the storage engine estimates it must compact to reach a settled LSM shape.", nil, nil),
		snapshots:  prometheus.NewDesc("doppio_snapshots_sent_total", "Snapshots this node streamed in full to replicas being added (replica moves, lagging followers).", nil, nil),
		snapBytes:  prometheus.NewDesc("doppio_snapshot_sent_bytes_total", "Sstable bytes this node streamed in snapshots.", nil, nil),
		rowHits:    prometheus.NewDesc("doppio_row_cache_hits_total", "Document reads answered by the row cache.", nil, nil),
		rowMisses:  prometheus.NewDesc("doppio_row_cache_misses_total", "Document reads the row cache could not answer (read from Pebble).", nil, nil),
		rowBytes:   prometheus.NewDesc("doppio_row_cache_bytes", "Bytes held by the row cache.", nil, nil),
		walSync:    prometheus.NewDesc("doppio_storage_wal_sync_seconds", "Duration of the storage engine's write-ahead log syncs (each makes every write waiting for it durable).", nil, nil),
		reads:      prometheus.NewDesc("doppio_linearizable_reads_total", "Linearizable read confirmations by how they were confirmed: under the leader's lease, by a quorum round (ReadIndex), or as the partition's only voter.", []string{"confirmed"}, nil),
		folds:      prometheus.NewDesc("doppio_index_folds_total", "Write sets that folded pending text index entries into segments, by each hosted partition while it led.", []string{"database", "partition"}, nil),
		folded:     prometheus.NewDesc("doppio_index_folded_documents_total", "Documents whose pending text index entries were folded into segments, by each hosted partition while it led.", []string{"database", "partition"}, nil),
		purged:     prometheus.NewDesc("doppio_index_purged_postings_total", "Dead postings of segments purged from their posting blocks, by each hosted partition while it led.", []string{"database", "partition"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.applied
	ch <- c.diskBytes
	ch <- c.walBytes
	ch <- c.compaction
	ch <- c.compacting
	ch <- c.debt
	ch <- c.snapshots
	ch <- c.snapBytes
	ch <- c.rowHits
	ch <- c.rowMisses
	ch <- c.rowBytes
	ch <- c.reads
	ch <- c.walSync
	ch <- c.folds
	ch <- c.folded
	ch <- c.purged
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for db, ps := range c.n.router.All() {
		for _, p := range ps {
			id := strconv.Itoa(p.ID)
			ch <- prometheus.MustNewConstMetric(c.applied, prometheus.GaugeValue, float64(p.Applied().Sequence), db, id)
			writes, docs, purged := p.FoldStats()
			ch <- prometheus.MustNewConstMetric(c.folds, prometheus.CounterValue, float64(writes), db, id)
			ch <- prometheus.MustNewConstMetric(c.folded, prometheus.CounterValue, float64(docs), db, id)
			ch <- prometheus.MustNewConstMetric(c.purged, prometheus.CounterValue, float64(purged), db, id)
		}
	}
	m := c.n.engine.Metrics()
	ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
	ch <- prometheus.MustNewConstMetric(c.walBytes, prometheus.CounterValue, float64(m.WAL.BytesWritten))
	ch <- prometheus.MustNewConstMetric(c.compaction, prometheus.CounterValue, float64(m.Compact.Count))
	ch <- prometheus.MustNewConstMetric(c.compacting, prometheus.GaugeValue, float64(m.Compact.NumInProgress))
	ch <- prometheus.MustNewConstMetric(c.debt, prometheus.GaugeValue, float64(m.Compact.EstimatedDebt))
	sent, bytes := c.n.host.SnapshotsSent()
	ch <- prometheus.MustNewConstMetric(c.snapshots, prometheus.CounterValue, float64(sent))
	ch <- prometheus.MustNewConstMetric(c.snapBytes, prometheus.CounterValue, float64(bytes))
	rows := c.n.engine.RowCacheStats()
	ch <- prometheus.MustNewConstMetric(c.rowHits, prometheus.CounterValue, float64(rows.Hits))
	ch <- prometheus.MustNewConstMetric(c.rowMisses, prometheus.CounterValue, float64(rows.Misses))
	ch <- prometheus.MustNewConstMetric(c.rowBytes, prometheus.GaugeValue, float64(rows.Bytes))
	lease, round, sole := c.n.host.Reads()
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(lease), "lease")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(round), "quorum")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(sole), "sole-voter")
	if h := m.LogWriter.FsyncLatency; h != nil {
		if sync, err := inSeconds(c.walSync, h); err == nil {
			ch <- sync
		}
	}
}

// syncBounds are about the bucket bounds (seconds) the WAL sync histogram
// is exported with; Pebble keeps a hundred finer ones, in nanoseconds.
var syncBounds = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// inSeconds exports h, a histogram of nanoseconds, as one of seconds under
// desc, with fewer buckets: for each of syncBounds, the largest bucket of h
// within it, at that bucket's own bound (so every count is exact).
func inSeconds(desc *prometheus.Desc, h prometheus.Histogram) (prometheus.Metric, error) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return nil, err
	}
	hist := m.GetHistogram()
	buckets := make(map[float64]uint64, len(syncBounds))
	for _, want := range syncBounds {
		var at *dto.Bucket
		for _, b := range hist.GetBucket() {
			if b.GetUpperBound()/1e9 > want*(1+1e-9) {
				break
			}
			at = b
		}
		if at != nil {
			buckets[at.GetUpperBound()/1e9] = at.GetCumulativeCount()
		}
	}
	return prometheus.NewConstHistogram(desc, hist.GetSampleCount(), hist.GetSampleSum()/1e9, buckets)
}

func quietZap() *zap.Logger {
	cfg := zap.NewProductionConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.ErrorLevel)
	l, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return l
}

// Replicas answers the change stream where partition p of db lives: the
// live voters of its Raft configuration (learners may still be receiving
// a snapshot), or its placement while no configuration is reported;
// leader flagged.
func (c clusterView) Replicas(db string, p int) []api.ReplicaAddr {
	v := c.n.view
	if v == nil {
		return nil
	}
	g, _, ok := v.Group(db, p)
	ids := g.Voters
	if pl, placed := v.Placement(db); !ok && placed && p < len(pl.Partitions) {
		ids = pl.Partitions[p].Replicas
	}
	leader, _, _ := v.Leader(db, p)
	var out []api.ReplicaAddr
	for _, id := range ids {
		if nd, ok := v.Node(id); ok && !slices.ContainsFunc(out, func(a api.ReplicaAddr) bool { return a.Node == id }) {
			out = append(out, api.ReplicaAddr{Node: id, HTTP: nd.HTTP, Leader: id == leader})
		}
	}
	return out
}
