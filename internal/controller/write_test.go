package controller

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/doppio-db/doppio/internal/membership"
)

// TestAPlacementWriteRewritesOnlyTheChunksThatChanged drives the active
// controller's writer against etcd: a placement in the older one-key form
// is rewritten as chunks (the old key kept as the initial placement),
// then a moved partition rewrites its chunk alone, and a chunk another
// writer changed meanwhile refuses the write and is read again.
func TestAPlacementWriteRewritesOnlyTheChunksThatChanged(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	s, err := concurrency.NewSession(c.cli)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	e := concurrency.NewElection(s, prefix+electionDir)
	if err := e.Campaign(ctx, "n0"); err != nil {
		t.Fatal(err)
	}
	d := &driver{cli: c.cli, e: e, opts: Options{Prefix: prefix}.withDefaults(), written: map[string]writtenPlacement{}}

	p := membership.Placement{Version: 1}
	for range 200 {
		p.Partitions = append(p.Partitions, membership.PartitionPlacement{Replicas: []string{"a", "b", "c"}, Leader: "a"})
	}
	whole, _ := json.Marshal(p)
	resp, err := c.cli.Put(ctx, prefix+membership.PlacementDir+"db", string(whole))
	if err != nil {
		t.Fatal(err)
	}
	d.written["db"] = writtenPlacement{Placement: p, rev: resp.Header.Revision}

	move := func(p membership.Placement, i int, leader string) membership.Placement {
		next := membership.Placement{Version: p.Version + 1, Partitions: slices.Clone(p.Partitions)}
		next.Partitions[i].Leader = leader
		return next
	}
	// keys lists the placement keys written by the last revision.
	keys := func() (written []string, all int) {
		resp, err := c.cli.Get(ctx, prefix+membership.PlacementDir, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range resp.Kvs {
			if kv.ModRevision == resp.Header.Revision {
				written = append(written, strings.TrimPrefix(string(kv.Key), prefix+membership.PlacementDir))
			}
		}
		return written, len(resp.Kvs)
	}

	p2 := move(p, 5, "b")
	if _, err := d.write(ctx, map[string]membership.Placement{"db": p2}); err != nil {
		t.Fatal(err)
	}
	if w, all := keys(); !slices.Equal(w, []string{"db/00000", "db/00001", "db/00002", "db/00003"}) || all != 5 {
		t.Fatalf("one-key form rewritten as %v of %d keys, want the 4 chunks beside the one key", w, all)
	}

	p3 := move(p2, 130, "c")
	if _, err := d.write(ctx, map[string]membership.Placement{"db": p3}); err != nil {
		t.Fatal(err)
	}
	if w, _ := keys(); !slices.Equal(w, []string{"db/00002"}) {
		t.Fatalf("moving partition 130 wrote %v, want db/00002 alone", w)
	}
	view, err := membership.Open(ctx, c.cli, prefix, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer view.Close()
	if init, ok, err := view.InitialPlacement(ctx, "db"); err != nil || !ok || init.Version != 1 || init.Partitions[5].Leader != "a" {
		t.Fatalf("initial placement after the rewrite as chunks: %v %v, version %d", ok, err, init.Version)
	}
	got, ok, err := membership.ReadPlacement(ctx, c.cli, prefix, "db", 0)
	if err != nil || !ok || got.Version != 3 || got.Partitions[5].Leader != "b" || got.Partitions[130].Leader != "c" || got.Partitions[131].Leader != "a" {
		t.Fatalf("placement read back: version %d, %v %v", got.Version, ok, err)
	}

	// Someone else rewrites chunk 2: the controller's next write of it
	// is refused, and what it knows is etcd's again.
	other, _ := membership.EncodePlacement(membership.Placement{}, move(p3, 140, "b"))
	if _, err := c.cli.Put(ctx, membership.PlacementKey(prefix, "db", 2), other[2]); err != nil {
		t.Fatal(err)
	}
	if _, err := d.write(ctx, map[string]membership.Placement{"db": move(p3, 150, "b")}); err == nil || !strings.Contains(err.Error(), "changed concurrently") {
		t.Fatalf("stale write: %v, want refused", err)
	}
	if w := d.written["db"]; w.Partitions[140].Leader != "b" || w.Partitions[150].Leader != "a" || w.rev != w.chunks[2] {
		t.Fatalf("after the refused write the controller knows partition 140 led by %s, 150 by %s, revisions %v", w.Partitions[140].Leader, w.Partitions[150].Leader, w.chunks)
	}
}
