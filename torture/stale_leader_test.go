package torture

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// leaderNode is the index of the node leading db's only partition with
// three voters, as the nodes' peer listeners report their replicas.
func leaderNode(t *testing.T, c *localCluster, db string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for i, n := range c.nodes {
			resp, err := http.Get(n.peer + "/_internal/replicas")
			if err != nil {
				continue
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 {
				continue
			}
			var info struct {
				Replicas []struct {
					Database string   `json:"database"`
					Role     string   `json:"role"`
					Voters   []string `json:"voters"`
				} `json:"replicas"`
			}
			_ = json.Unmarshal(b, &info)
			for _, r := range info.Replicas {
				if r.Database == db && r.Role == "leader" && len(r.Voters) == 3 {
					return i
				}
			}
		}
	}
	t.Fatalf("no leader of %s with three voters", db)
	return -1
}

// TestResumedStaleLeaderDoesNotRefuseFromStaleState is what the register
// workload found: a leader paused past an election timeout resumes still
// believing it leads, and answered a compare-and-set 412 from its stale
// state although the register held the expected value (committed by the
// new leader meanwhile): a definite answer no linearization allows. A
// refusal is now confirmed by a quorum round first (partition.confirmLocal).
func TestResumedStaleLeaderDoesNotRefuseFromStaleState(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of three processes")
	}
	c := startLocalCluster(t, 3)
	ctx := context.Background()
	hc := NewClient(-1, c.Endpoints(), newHTTPClient(), rand.New(rand.NewPCG(1, 1)))
	hc.Timeout = 20 * time.Second
	if err := createDatabase(ctx, hc, "stale", 1, map[string]string{"Register": registerTable}); err != nil {
		t.Fatal(err)
	}
	if _, err := hc.Retry(ctx, "PUT", "/stale/Register/k", map[string]any{"v": 1}, 200, 201); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		l := leaderNode(t, c, "stale")
		c.nodes[l].mu.Lock()
		cmd := c.nodes[l].cmd
		c.nodes[l].mu.Unlock()
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		// The other two elect a leader, which commits a new value.
		other := (l + 1) % 3
		v := int64(100 + round)
		var etag string
		for etag == "" {
			resp, err := hc.DoAt(ctx, other, "PUT", "/stale/Register/k", map[string]any{"v": v})
			switch {
			case err == nil && resp.Status == 200:
				etag = resp.Header.Get("ETag")
			case err == nil && resp.Status < 500:
				t.Fatalf("write through n%d: %d %s", other+1, resp.Status, resp.Body)
			default:
				time.Sleep(100 * time.Millisecond)
			}
		}
		// A compare-and-set from that value waits at the paused old leader
		// and meets it as it resumes.
		type answer struct {
			resp *Response
			err  error
		}
		ch := make(chan answer, 1)
		go func() {
			resp, err := hc.DoAt(ctx, l, "PUT", "/stale/Register/k", map[string]any{"v": v + 1000}, "If-Match", etag)
			ch <- answer{resp, err}
		}()
		time.Sleep(300 * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		a := <-ch
		if a.err != nil {
			t.Fatalf("round %d: compare-and-set at the resumed old leader n%d: %v", round, l+1, a.err)
		}
		t.Logf("round %d: compare-and-set at the resumed old leader n%d answered %d", round, l+1, a.resp.Status)
		if a.resp.Status == 412 {
			t.Fatalf("round %d: a compare-and-set from the committed value %d was refused by the resumed old leader n%d: %s", round, v, l+1, a.resp.Body)
		}
	}
}
