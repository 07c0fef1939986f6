package main

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/doppio-db/doppio/internal/membership"
)

// routingDirs are the directories a router's membership.View watches
// that an event changes (intents are the operator's and stay put here).
var routingDirs = []string{membership.NodesDir, membership.PlacementDir, membership.LeadersDir, membership.GroupsDir}

// traffic is what etcd took and gave for one event.
type traffic struct {
	Puts      int
	PutBytes  map[string]int64 // key+value bytes of the puts, by directory ("/placement/", …)
	WatchRecv int64            // bytes of the events a watcher of routingDirs received
	Last      time.Time        // the last event seen
}

// PutTotal is the key+value bytes of every put.
func (t traffic) PutTotal() int64 {
	var n int64
	for _, b := range t.PutBytes {
		n += b
	}
	return n
}

// meter watches every key under the prefix from a revision on and counts
// the puts' bytes; the routing watchers' events are counted at the size
// etcd encodes them in a watch response.
type meter struct {
	prefix string
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	t  traffic
}

func startMeter(cli *clientv3.Client, prefix string, from int64) *meter {
	ctx, cancel := context.WithCancel(context.Background())
	m := &meter{prefix: prefix, cancel: cancel, t: traffic{PutBytes: map[string]int64{}, Last: time.Now()}}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		for resp := range cli.Watch(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(from)) {
			m.mu.Lock()
			for _, ev := range resp.Events {
				m.t.Last = time.Now()
				if ev.Type == mvccpb.PUT {
					m.t.Puts++
					m.t.PutBytes[m.dir(string(ev.Kv.Key))] += int64(len(ev.Kv.Key) + len(ev.Kv.Value))
				}
			}
			m.mu.Unlock()
		}
	}()
	for _, dir := range routingDirs {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			for resp := range cli.Watch(ctx, prefix+dir, clientv3.WithPrefix(), clientv3.WithRev(from)) {
				var n int64
				for _, ev := range resp.Events {
					n += int64(proto.Size((*mvccpb.Event)(ev)))
				}
				m.mu.Lock()
				m.t.WatchRecv += n
				m.mu.Unlock()
			}
		}()
	}
	return m
}

// dir is the directory of key under the prefix ("/placement/"), or the
// key itself for one outside a directory.
func (m *meter) dir(key string) string {
	rest := strings.TrimPrefix(key, m.prefix)
	if i := strings.IndexByte(rest[1:], '/'); i >= 0 {
		return rest[:i+2]
	}
	return rest
}

// quiet waits until nothing was written for idle, and returns when the
// last write was.
func (m *meter) quiet(ctx context.Context, idle time.Duration) (time.Time, error) {
	for {
		m.mu.Lock()
		last := m.t.Last
		m.mu.Unlock()
		if time.Since(last) >= idle {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(idle - time.Since(last)):
		}
	}
}

func (m *meter) stop() traffic {
	m.cancel()
	m.wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.t
}
