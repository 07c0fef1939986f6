package node

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/doppio-db/doppio/internal/quota"
)

// openQuotas loads the quotas from etcd into a limiter whose metrics go
// to registry, and gives them to the API.
func (n *Node) openQuotas(ctx context.Context, cli *clientv3.Client, registry *prometheus.Registry) error {
	lim := quota.NewLimiter(quota.LimiterConfig{Burst: n.cfg.QuotaBurst})
	registry.MustRegister(lim.Collectors()...)
	st, err := quota.Open(ctx, quota.StoreConfig{Client: cli, Prefix: etcdPrefix, Limiter: lim, Logger: n.log})
	if err != nil {
		return fmt.Errorf("quotas: %w", err)
	}
	n.quotas = st
	n.api.AttachQuotas(st)
	n.api.RefuseEarly(lim.Version)
	return nil
}

// quotaLoop keeps this node's shares of the quotas in line with the
// partitions it leads.
func (n *Node) quotaLoop() {
	defer n.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-n.stop
		cancel()
	}()
	n.quotas.Limiter().FollowShares(ctx, time.Second, n.quotaShares)
}

// quotaShares counts the partitions this node leads against every
// database's (see quota.Divide).
func (n *Node) quotaShares() quota.Shares {
	partitions := map[string]int{}
	for _, d := range n.catalog.Databases() {
		partitions[d.Name] = d.Partitions
	}
	led := map[string]int{}
	for db, reps := range n.registry.All() {
		for _, rep := range reps {
			if _, g, ok := n.registry.Hosted(db, rep.ID); ok {
				if _, leading := g.Leader(); leading {
					led[db]++
				}
			}
		}
	}
	return quota.Divide(led, partitions)
}
