package changes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/changes/internal/etcdhttp"
)

func (c *Consumer) etcd() *etcdhttp.Client {
	return &etcdhttp.Client{Endpoints: c.EtcdEndpoints, HTTP: c.EtcdHTTPClient}
}

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
	etcd := c.etcd()
	for ctx.Err() == nil {
		sess, err := newSession(ctx, etcd, ttl)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			c.logf("changes: group session: %v; retrying", err)
			time.Sleep(time.Second)
			continue
		}
		err = c.member(ctx, etcd, sess, parts)
		c.setOwned(nil)
		sess.close() // revokes the lease: our keys go at once
		if err != nil && ctx.Err() == nil {
			c.logf("changes: group member %s: %v; rejoining", c.Instance, err)
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// member is one lease's life in the group.
func (c *Consumer) member(ctx context.Context, etcd *etcdhttp.Client, sess *session, parts []int) error {
	lease := sess.lease
	if err := etcd.Put(ctx, c.groupKey("members", c.Instance), c.Instance, lease); err != nil {
		return err
	}
	var store CheckpointStore = c.Store
	if es, ok := c.Store.(*EtcdStore); ok {
		guarded := *es
		guarded.guard = func(ps []int) []etcdhttp.Compare {
			var cmps []etcdhttp.Compare
			for _, p := range ps {
				cmps = append(cmps, etcdhttp.ValueIs(c.ownerKey(p), c.Instance))
			}
			return cmps
		}
		store = &guarded
	}
	wctx, stopWatch := context.WithCancel(ctx) // the watch lives as long as this lease
	defer stopWatch()
	watch := etcd.Watch(wctx, c.groupKey()+"/")
	for {
		mine, err := c.assignment(ctx, etcd, parts)
		if err != nil {
			return err
		}
		owned, err := c.acquire(ctx, etcd, lease, mine)
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
			case <-sess.done:
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
				if !ok || wr.Err != nil {
					cancel()
					<-done
					return fmt.Errorf("watch ended: %v", wr.Err)
				}
				changed := false
				for _, ev := range wr.Events {
					k := ev.KV.Key
					if strings.HasPrefix(k, c.groupKey("members")+"/") {
						changed = true // rank may have moved: recompute
					}
					if ev.Delete && strings.HasPrefix(k, c.groupKey("owners")+"/") {
						changed = changed || len(owned) < len(mine)
					}
				}
				if changed {
					next, err := c.assignment(ctx, etcd, parts)
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
		next, err := c.assignment(ctx, etcd, parts)
		if err != nil {
			return err
		}
		for _, p := range owned {
			if !slices.Contains(next, p) {
				_, err := etcd.Txn(ctx, []etcdhttp.Compare{etcdhttp.ValueIs(c.ownerKey(p), c.Instance)},
					[]etcdhttp.Op{etcdhttp.DeleteOp(c.ownerKey(p))}, nil)
				if err != nil {
					return err
				}
			}
		}
	}
}

// assignment is this instance's share of parts, by its rank among the
// group's live members.
func (c *Consumer) assignment(ctx context.Context, etcd *etcdhttp.Client, parts []int) ([]int, error) {
	kvs, err := etcd.GetPrefix(ctx, c.groupKey("members")+"/", true)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, kv := range kvs {
		ids = append(ids, strings.TrimPrefix(kv.Key, c.groupKey("members")+"/"))
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
func (c *Consumer) acquire(ctx context.Context, etcd *etcdhttp.Client, lease int64, mine []int) ([]int, error) {
	var owned []int
	for _, p := range mine {
		k := c.ownerKey(p)
		resp, err := etcd.Txn(ctx, []etcdhttp.Compare{etcdhttp.Absent(k)},
			[]etcdhttp.Op{etcdhttp.PutOp(k, c.Instance, lease)}, []etcdhttp.Op{etcdhttp.GetOp(k)})
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			owned = append(owned, p)
			continue
		}
		if kvs := resp.Reads[0]; len(kvs) > 0 && kvs[0].Value == c.Instance {
			owned = append(owned, p)
		}
	}
	return owned, nil
}

// session is one lease of the group, kept alive in the background: done
// closes once the lease may have expired (etcd said so, or no renewal
// succeeded for a whole TTL), after which the instance must rejoin.
type session struct {
	etcd    *etcdhttp.Client
	lease   int64
	done    chan struct{}
	stop    context.CancelFunc
	stopped chan struct{}
}

func newSession(ctx context.Context, etcd *etcdhttp.Client, ttl int) (*session, error) {
	gctx, cancel := context.WithTimeout(ctx, time.Duration(ttl)*time.Second)
	lease, err := etcd.Grant(gctx, int64(ttl))
	cancel()
	if err != nil {
		return nil, err
	}
	kctx, stop := context.WithCancel(ctx)
	s := &session{etcd: etcd, lease: lease, done: make(chan struct{}), stop: stop, stopped: make(chan struct{})}
	go s.keepAlive(kctx, time.Duration(ttl)*time.Second)
	return s, nil
}

// keepAlive renews the lease three times per TTL, as etcd's own client
// does, so one lost renewal does not lose the lease.
func (s *session) keepAlive(ctx context.Context, ttl time.Duration) {
	defer close(s.stopped)
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, ttl/3)
		left, err := s.etcd.KeepAlive(rctx, s.lease)
		cancel()
		switch {
		case err == nil && left > 0:
			renewed = time.Now()
		case err == nil || time.Since(renewed) >= ttl:
			close(s.done) // expired, or may have
			return
		}
	}
}

// close stops renewing and revokes the lease, deleting its keys at once.
func (s *session) close() {
	s.stop()
	<-s.stopped
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.etcd.Revoke(ctx, s.lease)
}
