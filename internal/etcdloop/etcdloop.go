// Package etcdloop runs a reconcile function whenever what it reads from
// etcd may have changed: on every change under a key prefix, and every
// interval for what moves without one (leaderships, replicas, clocks).
//
// The function reads the state it needs itself, so a missed or coalesced
// notification costs nothing but a wait until the next tick: the watch
// only makes the loop prompt. A watch that ends (its etcd member lost,
// compaction) is opened again on the next turn.
package etcdloop

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Run calls reconcile at once, then after each change under prefix and
// each interval, until ctx is done. It returns when ctx is done; reconcile
// is never called concurrently with itself.
func Run(ctx context.Context, c *clientv3.Client, prefix string, interval time.Duration, reconcile func(context.Context)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var watch clientv3.WatchChan
	for {
		if watch == nil {
			watch = c.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix())
		}
		reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case _, ok := <-watch:
			if !ok {
				watch = nil
			}
		case <-tick.C:
		}
	}
}
