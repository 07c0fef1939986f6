package changes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

func (c *Consumer) groupKey(parts ...string) string {
	prefix := c.GroupPrefix
	if prefix == "" {
		prefix = "/doppio-consumers"
	}
	return strings.Join(append([]string{prefix, c.Group, c.DB}, parts...), "/")
}

func (c *Consumer) ownerKey(p int) string { return c.groupKey("owners", fmt.Sprint(p)) }

// assign is the partitions of parts that the member at rank i of n
// consumes: every n-th, so shares differ by at most one.
func assign(parts []int, i, n int) []int {
	var out []int
	for j, p := range parts {
		if j%n == i {
			out = append(out, p)
		}
	}
	return out
}

// runGroup consumes the partitions assigned to this instance, re-deciding
// whenever the group's membership changes; it keeps going across lost
// leases (a new session re-registers).
func (c *Consumer) runGroup(ctx context.Context, parts []int) error {
	if c.Instance == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		c.Instance = hex.EncodeToString(b[:])
	}
	ttl := c.LeaseTTL
	if ttl <= 0 {
		ttl = 5
	}
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(c.Etcd, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.logf("changes: group session: %v; retrying", err)
			time.Sleep(time.Second)
			continue
		}
		err = c.member(ctx, sess, parts)
		c.setOwned(nil)
		sess.Close() // revokes the lease: our keys go at once
		if err != nil && ctx.Err() == nil {
			c.logf("changes: group member %s: %v; rejoining", c.Instance, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// member is one lease's life in the group.
func (c *Consumer) member(ctx context.Context, sess *concurrency.Session, parts []int) error {
	lease := sess.Lease()
	if _, err := c.Etcd.Put(ctx, c.groupKey("members", c.Instance), c.Instance, clientv3.WithLease(lease)); err != nil {
		return err
	}
	var store CheckpointStore = c.Store
	if es, ok := c.Store.(*EtcdStore); ok {
		guarded := *es
		guarded.guard = func(ps []int) []clientv3.Cmp {
			var cmps []clientv3.Cmp
			for _, p := range ps {
				cmps = append(cmps, clientv3.Compare(clientv3.Value(c.ownerKey(p)), "=", c.Instance))
			}
			return cmps
		}
		store = &guarded
	}
	watch := c.Etcd.Watch(clientv3.WithRequireLeader(ctx), c.groupKey()+"/", clientv3.WithPrefix())
	for {
		mine, err := c.assignment(ctx, parts)
		if err != nil {
			return err
		}
		owned, err := c.acquire(ctx, lease, mine)
		if err != nil {
			return err
		}
		c.setOwned(owned)
		c.logf("changes: instance %s consumes partitions %v (assigned %v)", c.Instance, owned, mine)
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.consume(cctx, owned, store) }()
		// Re-decide when membership changes, when a partition we wait for
		// is released, or (while waiting) every second.
		var retry <-chan time.Time
		if len(owned) < len(mine) {
			retry = time.After(time.Second)
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				cancel()
				<-done
				return nil
			case <-sess.Done():
				cancel()
				<-done
				return fmt.Errorf("lease lost")
			case err := <-done:
				cancel()
				if err == nil {
					return nil
				}
				return err
			case <-retry:
				break wait
			case wr, ok := <-watch:
				if !ok || wr.Err() != nil {
					cancel()
					<-done
					return fmt.Errorf("watch ended: %v", wr.Err())
				}
				changed := false
				for _, ev := range wr.Events {
					k := string(ev.Kv.Key)
					if strings.HasPrefix(k, c.groupKey("members")+"/") {
						changed = true // rank may have moved: recompute
					}
					if ev.Type == clientv3.EventTypeDelete && strings.HasPrefix(k, c.groupKey("owners")+"/") {
						changed = changed || len(owned) < len(mine)
					}
				}
				if changed {
					next, err := c.assignment(ctx, parts)
					if err != nil || !slices.Equal(next, mine) || len(owned) < len(mine) {
						break wait
					}
				}
			}
		}
		cancel()
		if err := <-done; err != nil && err != context.Canceled {
			return err
		}
		// Hand over what is no longer ours (progress was saved on stop).
		next, err := c.assignment(ctx, parts)
		if err != nil {
			return err
		}
		for _, p := range owned {
			if !slices.Contains(next, p) {
				_, err := c.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.Value(c.ownerKey(p)), "=", c.Instance)).
					Then(clientv3.OpDelete(c.ownerKey(p))).Commit()
				if err != nil {
					return err
				}
			}
		}
	}
}

// assignment is this instance's share of parts, by its rank among the
// group's live members.
func (c *Consumer) assignment(ctx context.Context, parts []int) ([]int, error) {
	resp, err := c.Etcd.Get(ctx, c.groupKey("members")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, kv := range resp.Kvs {
		ids = append(ids, strings.TrimPrefix(string(kv.Key), c.groupKey("members")+"/"))
	}
	slices.Sort(ids)
	i := slices.Index(ids, c.Instance)
	if i < 0 {
		return nil, fmt.Errorf("instance %s is not registered", c.Instance)
	}
	return assign(parts, i, len(ids)), nil
}

// acquire takes the ownership key of each partition of mine that no other
// instance holds, and returns those this instance holds.
func (c *Consumer) acquire(ctx context.Context, lease clientv3.LeaseID, mine []int) ([]int, error) {
	var owned []int
	for _, p := range mine {
		k := c.ownerKey(p)
		resp, err := c.Etcd.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(clientv3.OpPut(k, c.Instance, clientv3.WithLease(lease))).
			Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			owned = append(owned, p)
			continue
		}
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && string(kvs[0].Value) == c.Instance {
			owned = append(owned, p)
		}
	}
	return owned, nil
}
