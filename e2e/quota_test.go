package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRouterRefusesOverQuotaEarly: once a partition's leader refuses a
// caller's writes as over quota, the router refuses the next ones itself
// (the leader counts no more refusals) for the wait the leader stated,
// still forwards the caller's reads, and forgets the refusal as soon as
// the quota changes.
func TestRouterRefusesOverQuotaEarly(t *testing.T) {
	nodes, ep := startClusterAt(t)
	rt := runNode(t, []string{"router", "--etcd", ep, "--http", freePort(t), "--id", "r1"})
	all := make([]*devNode, len(nodes))
	for i, n := range nodes {
		all[i] = n.devNode
	}
	rt.must(201, "PUT", "/_schemas/qe", map[string]any{"partitions": 1, "replicas": 1})
	rt.must(201, "PUT", "/_schemas/qe/Counter", counterSchema)
	mustRetrying503(t, rt, 404, "GET", "/qe/Counter/g/0", nil)
	rt.must(201, "PUT", "/_quotas/databases/qe", map[string]any{"writeUnitsPerSecond": 1})

	// The bucket starts with 10 units (10 s of burst); a 60-KiB write is
	// admitted and leaves some 50 units of debt: 50 s at 1 unit a second.
	waitFor(t, 10*time.Second, "the quota reaches the leader", func() (bool, string) {
		code, _, body := rt.do("PUT", "/qe/Counter/g/1", map[string]any{"n": 1, "writer": strings.Repeat("x", 60<<10)})
		return code == 201, fmt.Sprintf("%d %s", code, body)
	})
	waitFor(t, 10*time.Second, "the leader refuses a write", func() (bool, string) {
		code, h, body := rt.do("PUT", "/qe/Counter/g/2", map[string]any{"n": 2})
		if code != 429 {
			return false, fmt.Sprintf("%d %s", code, body)
		}
		ms, err := strconv.Atoi(h.Get("X-Doppio-Retry-After-Ms"))
		retry, _ := strconv.Atoi(h.Get("Retry-After"))
		if err != nil || ms < 30000 || (retry-1)*1000 >= ms || ms > retry*1000 {
			t.Fatalf("the leader's refusal: Retry-After %q, X-Doppio-Retry-After-Ms %q", h.Get("Retry-After"), h.Get("X-Doppio-Retry-After-Ms"))
		}
		return true, ""
	})
	throttled := metricSum(t, "doppio_quota_throttled_requests_total", `name="qe"`, all...)

	for i := range 5 {
		code, h, body := rt.do("PUT", fmt.Sprintf("/qe/Counter/g/%d", 10+i), map[string]any{"n": 3})
		if code != 429 || !strings.Contains(string(body), "refused here") || h.Get("Retry-After") == "" || h.Get("X-Doppio-Retry-After-Ms") == "" {
			t.Fatalf("write %d after the leader's refusal: %d %v %s", i, code, h, body)
		}
	}
	if got := metricSum(t, "doppio_quota_early_refusals_total", "", rt); got != 5 {
		t.Fatalf("the router counts %v early refusals, want 5", got)
	}
	if got := metricSum(t, "doppio_quota_throttled_requests_total", `name="qe"`, all...); got != throttled {
		t.Fatalf("the leader refused %v requests, %v before: the router forwarded a refused kind", got, throttled)
	}
	// Reads use other buckets: forwarded, and served.
	rt.must(200, "GET", "/qe/Counter/g/1", nil)

	// A quota change forgets the refusal long before its 30-odd seconds.
	rt.must(204, "DELETE", "/_quotas/databases/qe", nil)
	waitFor(t, 5*time.Second, "a write through the router once the quota is gone", func() (bool, string) {
		code, _, body := rt.do("PUT", "/qe/Counter/g/3", map[string]any{"n": 3})
		return code == 201, fmt.Sprintf("%d %s", code, body)
	})
}
