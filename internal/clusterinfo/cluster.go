package clusterinfo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/peer"
	"github.com/doppio-db/doppio/internal/replication"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is the membership view /_cluster is assembled from
// (*membership.View).
type Cluster interface {
	Nodes() []membership.Node
	Intent(id string) membership.Intent
	Placements() map[string]membership.PlacementRecord
}

// Config is what a Reporter reads. Every field is required.
type Config struct {
	// Node is this node's id.
	Node string
	// Client and Prefix locate the rebalance progress in etcd.
	Client  *clientv3.Client
	Prefix  string
	Cluster Cluster
	// Controller returns the node id of the active placement controller.
	Controller func(ctx context.Context) (string, error)
	// Local is this node's own report (Local).
	Local func() wire.LocalInfo
	// Peers asks other nodes for theirs, at their peer listeners (default
	// plaintext).
	Peers *peer.Client
}

// Reporter answers GET /_cluster.
type Reporter struct {
	cfg Config
}

// New returns a Reporter reading cfg.
func New(cfg Config) *Reporter {
	if cfg.Peers == nil {
		cfg.Peers = peer.NewClient(nil)
	}
	return &Reporter{cfg: cfg}
}

// Starting is what /_cluster answers while node, listening on addr, has
// no view of the cluster yet.
func Starting(node, addr string) wire.ClusterInfo {
	info := empty()
	info.Nodes = append(info.Nodes, wire.NodeInfo{ID: node, HTTP: addr, State: "starting"})
	return info
}

func empty() wire.ClusterInfo {
	return wire.ClusterInfo{Nodes: []wire.NodeInfo{}, Partitions: []wire.PartitionInfo{}, Transfers: []wire.TransferInfo{}}
}

// Info gathers every live node's replicas (each node answers for its
// own; unreachable nodes are left out) and joins them with the
// placement.
func (r *Reporter) Info(ctx context.Context) wire.ClusterInfo {
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	controller, _ := r.cfg.Controller(cctx)
	var rebalance *membership.Rebalance
	if rb, ok, err := membership.ReadRebalance(cctx, r.cfg.Client, r.cfg.Prefix); err == nil && ok {
		rebalance = &rb
	}
	cancel()
	nodes := r.cfg.Cluster.Nodes()
	reports := make([]wire.LocalInfo, len(nodes))
	var wg sync.WaitGroup
	for i, nd := range nodes {
		if nd.ID == r.cfg.Node {
			reports[i] = r.cfg.Local()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], _ = fetchLocal(ctx, r.cfg.Peers, nd)
		}()
	}
	wg.Wait()
	info := Assemble(nodes, r.cfg.Cluster.Intent, r.cfg.Cluster.Placements(), reports)
	info.Controller, info.Rebalance = controller, rebalance
	return info
}

// Assemble joins the reports of the live nodes with the placements: each
// node with the replicas it leads and follows, each placed partition with
// its leader's view of its members (the report of the highest term wins),
// and the nodes a placement names but that are not live, as dead; and the
// nodes' read sides of the cache tier (AddCache completes that section).
func Assemble(nodes []membership.Node, intent func(id string) membership.Intent, placements map[string]membership.PlacementRecord, reports []wire.LocalInfo) wire.ClusterInfo {
	info := empty()
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
		if r.Cache != nil {
			if info.Cache == nil {
				info.Cache = &wire.CacheInfo{}
			}
			p := *r.Cache
			p.Process = r.Node
			info.Cache.Processes = append(info.Cache.Processes, p)
		}
		for _, lr := range r.Replicas {
			k := key{lr.Database, lr.Partition}
			byPart[k] = append(byPart[k], reported{r.Node, lr})
			if lr.Role == replication.RoleLeader.String() {
				leads[r.Node]++
			} else {
				follows[r.Node]++
			}
		}
	}
	known := map[string]bool{}
	versions := map[string]bool{}
	for _, nd := range nodes {
		versions[nd.Version] = true
		started := nd.Started
		known[nd.ID] = true
		info.Nodes = append(info.Nodes, wire.NodeInfo{
			ID: nd.ID, HTTP: nd.HTTP, GRPC: nd.GRPC, Zone: nd.Zone, State: "alive", Started: &started, Version: nd.Version, Intent: string(intent(nd.ID).State),
			Leads: leads[nd.ID], Follows: follows[nd.ID],
		})
	}
	for db, rec := range placements {
		for p, pp := range rec.Partitions {
			for _, r := range pp.Replicas {
				if !known[r] {
					known[r] = true
					info.Nodes = append(info.Nodes, wire.NodeInfo{ID: r, State: "dead", Intent: string(intent(r).State)})
				}
			}
			pi := wire.PartitionInfo{Database: db, Partition: p, Replicas: slices.Clone(pp.Replicas), Members: []wire.ReplicaInfo{}}
			reps := byPart[key{db, p}]
			var leader *wire.LocalReplica
			for i := range reps {
				if reps[i].Role == replication.RoleLeader.String() && (leader == nil || reps[i].Term > leader.Term) {
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
	info.MixedVersions = len(versions) > 1
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

// fetchLocal asks another node for its replicas, at its peer listener.
func fetchLocal(ctx context.Context, peers *peer.Client, nd membership.Node) (wire.LocalInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, peers.URL(nd.GRPC, "/_internal/replicas"), nil)
	if err != nil {
		return wire.LocalInfo{}, err
	}
	resp, err := peers.Do(req)
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
