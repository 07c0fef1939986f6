package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// attempt is one answer kept to compare a retry's with.
type attempt struct {
	status int
	header http.Header
	body   []byte
}

// TestIdempotentRetryAfterLeaderKillAppliesOnce acknowledges an
// auto-increment insert, a transaction and a batch carrying
// Idempotency-Keys, kills -9 the partition's leader, and retries each
// with its key through another node: the new leader answers the first
// outcome (status, body, ETag, Location, SCN), and exactly one copy of
// each write exists. The outcome was replicated with the write itself.
func TestIdempotentRetryAfterLeaderKillAppliesOnce(t *testing.T) {
	nodes := startCluster(t)
	nodes[0].must(201, "PUT", "/_schemas/idem", map[string]any{"partitions": 1, "replicas": 3})
	nodes[0].must(201, "PUT", "/_schemas/idem/Message", backupMessageSchema)
	waitFor(t, 15*time.Second, "3 caught-up replicas and a leader", func() (bool, string) {
		return settled(clusterInfo(t, nodes[1]), 1, 3)
	})
	leader := clusterInfo(t, nodes[0]).Partitions[0].Leader
	var victim *clusterNode
	var others []*clusterNode
	for _, n := range nodes {
		if n.id == leader {
			victim = n
		} else {
			others = append(others, n)
		}
	}
	if victim == nil {
		t.Fatalf("no node leads the partition (leader %q)", leader)
	}
	msg := func(subject string) map[string]any { return map[string]any{"subject": subject, "folder": "inbox"} }
	requests := []struct {
		key, path string
		body      any
		want      int
	}{
		{"insert-1", "/idem/Message/box", msg("hello"), 201},
		{"txn-1", "/idem/_txn", map[string]any{"ops": []any{
			map[string]any{"op": "insert", "table": "Message", "key": []any{"txn"}, "document": msg("a")},
			map[string]any{"op": "insert", "table": "Message", "key": []any{"txn"}, "document": msg("b")},
		}}, 200},
		{"batch-1", "/idem/_batch", map[string]any{"ops": []any{
			map[string]any{"op": "insert", "table": "Message", "key": []any{"batch"}, "document": msg("c")},
		}}, 200},
	}
	// The first attempts go through a follower's node, which forwards them
	// to the leader; each is acknowledged.
	first := make([]attempt, len(requests))
	for i, r := range requests {
		st, h, b := others[0].do("POST", r.path, r.body, "Idempotency-Key", r.key, "X-Doppio-Timeout", "5s")
		if st != r.want {
			t.Fatalf("first %s: %d %s", r.path, st, b)
		}
		first[i] = attempt{st, h, b}
	}
	t.Logf("killing %s, the leader", victim.id)
	victim.kill()

	for i, r := range requests {
		var again attempt
		deadline := time.Now().Add(15 * time.Second)
		for {
			st, h, b := others[1].do("POST", r.path, r.body, "Idempotency-Key", r.key, "X-Doppio-Timeout", "5s")
			again = attempt{st, h, b}
			if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if again.status != first[i].status || string(again.body) != string(first[i].body) {
			t.Fatalf("retry of %s after the kill: %d %s, want the first outcome %d %s", r.key, again.status, again.body, first[i].status, first[i].body)
		}
		if again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry of %s is not marked replayed: %v", r.key, again.header)
		}
		for _, h := range []string{"ETag", "Location", "Last-Modified", "X-Doppio-SCN"} {
			if again.header.Get(h) != first[i].header.Get(h) {
				t.Fatalf("retry of %s: %s %q, first %q", r.key, h, again.header.Get(h), first[i].header.Get(h))
			}
		}
	}
	waitFor(t, 10*time.Second, "a new leader published", func() (bool, string) {
		now := clusterInfo(t, others[0]).Partitions[0].Leader
		return now != "" && now != victim.id, "leader " + now
	})

	// Exactly one copy of each write.
	for box, want := range map[string]int{"box": 1, "txn": 2, "batch": 1} {
		var page struct {
			Documents []json.RawMessage `json:"documents"`
		}
		if err := json.Unmarshal(others[0].must(200, "GET", "/idem/Message/"+box, nil), &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Documents) != want {
			t.Fatalf("mailbox %s holds %d messages, want %d", box, len(page.Documents), want)
		}
	}
	// The new leader refuses the key for another request, as the old would.
	st, _, b := others[1].do("POST", "/idem/Message/box", msg("other"), "Idempotency-Key", "insert-1")
	if st != 422 {
		t.Fatalf("key reused after the failover: %d %s, want 422", st, b)
	}
}
