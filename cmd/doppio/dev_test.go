package main

import (
	"fmt"
	"testing"

	"github.com/doppio-db/doppio/internal/partition"
)

func TestDevClusterNodesServePprofOnConsecutivePorts(t *testing.T) {
	for k, want := range []string{"127.0.0.1:6060", "127.0.0.1:6061", "127.0.0.1:6062"} {
		got, err := nthPort("127.0.0.1:6060", k)
		if err != nil || got != want {
			t.Errorf("node %d: %q, %v; want %q", k+1, got, err, want)
		}
	}
	for _, bad := range []string{"127.0.0.1:0", "127.0.0.1", "host:http"} {
		if got, err := nthPort(bad, 1); err == nil {
			t.Errorf("nthPort(%q) = %q, want an error", bad, got)
		}
	}
}

// TestDevClusterPassesEveryNodeFlagToItsNodes: each node flag given to dev
// (or its default) reaches the `doppio start` children, and every flag dev
// passes on is one start accepts.
func TestDevClusterPassesEveryNodeFlagToItsNodes(t *testing.T) {
	dev := devCommand(&clientFlags{})
	if err := dev.ParseFlags([]string{"--row-cache-bytes", "5", "--check-rate", "7", "--changelog-max-age", "1h", "--nodes", "3", "--pprof", "127.0.0.1:6060"}); err != nil {
		t.Fatal(err)
	}
	args := sharedNodeArgs(dev)
	got := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		got[args[i]] = args[i+1]
	}
	for flag, want := range map[string]string{"--row-cache-bytes": "5", "--check-rate": "7", "--changelog-max-age": "1h0m0s", "--backfill-rate": fmt.Sprint(partition.DefaultBackfillRate)} {
		if got[flag] != want {
			t.Errorf("%s reaches the nodes as %q, want %q (args %v)", flag, got[flag], want, args)
		}
	}
	for _, own := range []string{"--nodes", "--pprof", "--data", "--http", "--etcd"} {
		if _, ok := got[own]; ok {
			t.Errorf("%s, which each node gets its own value of, is passed on as given", own)
		}
	}
	start := startCommand(&clientFlags{})
	if err := start.ParseFlags(args); err != nil {
		t.Fatalf("start refuses what dev passes on: %v", err)
	}
}

// TestRestartCommandsSurviveTheShell: a printed restart command keeps
// empty and special values one word each.
func TestRestartCommandsSurviveTheShell(t *testing.T) {
	c := &devChild{bin: "/opt/doppio dir/doppio", args: []string{"start", "--audit-log", "", "--zone", "it's", "--http", "127.0.0.1:8080"}}
	want := `'/opt/doppio dir/doppio' start --audit-log '' --zone 'it'\''s' --http 127.0.0.1:8080`
	if got := c.commandLine(); got != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}

// TestFreeAddrsAreDistinct: the ports a dev cluster's nodes are given
// are all different, so no node finds its port taken by another's.
func TestFreeAddrsAreDistinct(t *testing.T) {
	for range 20 {
		addrs, err := freeAddrs(40)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, a := range addrs {
			if seen[a] {
				t.Fatalf("%s handed out twice in %v", a, addrs)
			}
			seen[a] = true
		}
	}
}
