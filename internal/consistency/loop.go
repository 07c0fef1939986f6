package consistency

import (
	"context"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Run checks each partition this node leads once its last check is
// Config.Interval old (never when the interval is zero), repairing what
// differs, until ctx is done. The last check is the latest of this node's
// and the one recorded in etcd by whichever leader ran it, and a partition
// never checked counts from the cluster's check epoch, so neither a
// restart nor a change of leader postpones a partition's check: with a
// node-local timer, a node restarted more often than the interval (a
// deploy a day against the default 6 h) never checked anything. A check
// that fails to run is tried again an interval later, as one that ran.
func (c *Checker) Run(ctx context.Context) {
	interval := c.cfg.Interval
	if interval <= 0 {
		return
	}
	t := time.NewTicker(min(max(interval/10, 10*time.Millisecond), time.Minute))
	defer t.Stop()
	epoch, _ := c.epoch(ctx)     // zero if etcd does not answer: tried again below
	tried := map[Ref]time.Time{} // failed attempts, by this loop
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if epoch.IsZero() {
			var err error
			if epoch, err = c.epoch(ctx); err != nil {
				continue // nothing is known to be due
			}
		}
		var recorded map[Ref]wire.PartitionCheck
		for ref, g := range c.cfg.Cluster.All() {
			if _, leading := g.Leader(); !leading {
				continue
			}
			if recorded == nil { // read once, and only if this node leads
				recorded = c.Recorded()
			}
			if !due(time.Now(), interval, epoch, tried[ref], c.Last(ref, recorded)) {
				continue
			}
			pc, err := c.run(ctx, ref, g, true)
			if err == nil && pc.HandedTo != "" && pc.Result != "repaired" {
				// This replica was the odd one out and is not rebuilt
				// yet: the new leader's check tries again.
				_, err = c.Partition(ctx, ref.DB, ref.Partition, true, false)
			}
			if err != nil {
				tried[ref] = time.Now()
				if ctx.Err() == nil {
					c.log.Warn("consistency check failed to run", "db", ref.DB, "partition", ref.Partition, "err", err)
				}
			}
		}
	}
}

// due reports whether a partition is due its background check at now:
// interval after the latest of the cluster's check epoch, this loop's
// last failed attempt and the last check recorded by any leader (st).
func due(now time.Time, interval time.Duration, epoch, tried time.Time, st *wire.CheckStatus) bool {
	last := later(epoch, tried)
	if st != nil && st.Last != nil {
		last = later(last, st.Last.At)
	}
	return now.Sub(last) >= interval
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// epochKey holds, under Config.Prefix, when the cluster's background
// checks began (RFC 3339): the first check loop to run writes it, and a
// partition never checked is due an interval after it.
const epochKey = "/checks-epoch"

// epoch reads the cluster's check epoch, writing it (now) if no node has
// yet.
func (c *Checker) epoch(ctx context.Context) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	key := c.cfg.Prefix + epochKey
	now := time.Now().UTC().Format(time.RFC3339Nano)
	resp, err := c.cfg.KV.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, now)).
		Else(clientv3.OpGet(key)).
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
