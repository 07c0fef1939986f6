package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client"
)

// hostRecorder remembers the host of every request it carries.
type hostRecorder struct {
	mu    sync.Mutex
	hosts []string
}

func (h *hostRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.hosts = append(h.hosts, r.URL.Host)
	h.mu.Unlock()
	return mode.transport().RoundTrip(r)
}

func (h *hostRecorder) take() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.hosts
	h.hosts = nil
	return out
}

// TestSmartClientSendsEachRequestToItsLeader gives a client one node of a
// three-node cluster and checks that, with smart routing, every document
// request goes straight to its partition's leader; and that when a leader
// dies a read still succeeds (through the seed node) and the client then
// learns the new leader.
func TestSmartClientSendsEachRequestToItsLeader(t *testing.T) {
	const partitions = 6
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/smart", map[string]any{"partitions": partitions, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/smart/Counter", counterSchema)
	groups := groupsByPartition(partitions)
	waitFor(t, 15*time.Second, "a leader per partition", func() (bool, string) {
		return settled(clusterInfo(t, nodes[0]), partitions, 3)
	})

	rec := &hostRecorder{}
	seed := nodes[0].addr
	c := client.New(seed, client.WithHTTPClient(&http.Client{Transport: rec}), client.WithSmartRouting(200*time.Millisecond))
	ctx := context.Background()
	leaderOf := func() map[int]string {
		info := clusterInfo(t, nodes[0])
		addr := map[string]string{}
		for _, n := range info.Nodes {
			addr[n.ID] = n.HTTP
		}
		out := map[int]string{}
		for _, p := range info.Partitions {
			out[p.Partition] = addr[p.Leader]
		}
		return out
	}
	leaders := leaderOf()
	for p, g := range groups {
		if _, err := c.Put(ctx, "smart", "Counter", client.Key{g, int64(1)}, map[string]any{"n": p}); err != nil {
			t.Fatalf("put to partition %d: %v", p, err)
		}
		hosts := rec.take()
		if last := hosts[len(hosts)-1]; last != leaders[p] {
			// Leaderships still move to the preferred leaders after the
			// placement: the client may know a newer leader than leaders.
			if leaders = leaderOf(); last != leaders[p] {
				t.Fatalf("partition %d: the write went to %s, its leader is %s (requests: %v)", p, last, leaders[p], hosts)
			}
		}
		d, err := c.Get(ctx, "smart", "Counter", client.Key{g, int64(1)})
		if err != nil || !strings.Contains(string(d.Body), fmt.Sprintf(`"n":%d`, p)) {
			t.Fatalf("read back partition %d: %v %s", p, err, d.Body)
		}
		if h := rec.take(); h[len(h)-1] != leaders[p] {
			if leaders = leaderOf(); h[len(h)-1] != leaders[p] {
				t.Fatalf("partition %d: the read went to %v, its leader is %s", p, h, leaders[p])
			}
		}
	}

	// Kill the leader of some partition other than the seed node.
	var victim *clusterNode
	var victimPart int
	for _, n := range nodes[1:] {
		for p, l := range leaders {
			if l == hostPort(n.addr) {
				victim, victimPart = n, p
			}
		}
	}
	if victim == nil {
		t.Fatalf("the seed node leads every partition (leaders %v): spread placement should not do that", leaders)
	}
	victim.kill()
	g := groups[victimPart]
	// A read is safe to send again: its first attempt, to the dead leader
	// (a reset keep-alive connection or a refused one), falls back to the
	// seed node. (A write meeting a reset connection has an unknown outcome
	// and is returned as an error, as it must be.)
	if _, err := c.Get(ctx, "smart", "Counter", client.Key{g, int64(1)}); err != nil {
		t.Fatalf("read after the leader's death: %v", err)
	}
	waitFor(t, 10*time.Second, "a new leader of the partition", func() (bool, string) {
		l := leaderOf()[victimPart]
		return l != "" && l != hostPort(victim.addr), l
	})
	time.Sleep(300 * time.Millisecond) // one refresh of the routing table
	newLeader := leaderOf()[victimPart]
	rec.take()
	if _, err := c.Get(ctx, "smart", "Counter", client.Key{g, int64(1)}); err != nil {
		t.Fatal(err)
	}
	if h := rec.take(); h[len(h)-1] != newLeader {
		t.Fatalf("after the failover the read went to %v, the new leader is %s", h, newLeader)
	}
}
