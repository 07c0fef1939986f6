package membership

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
)

func placementOf(partitions int, leader func(i int) string) Placement {
	p := Placement{Version: 1}
	for i := range partitions {
		p.Partitions = append(p.Partitions, PartitionPlacement{Replicas: []string{"a", "b", "c"}, Leader: leader(i)})
	}
	return p
}

// TestOneMovedPartitionRewritesOneChunk: a change to one partition of a
// large database encodes one chunk, and a view applies it to that
// partition alone, with that chunk's revision.
func TestOneMovedPartitionRewritesOneChunk(t *testing.T) {
	cli, v, _ := openView(t)
	ctx := context.Background()
	first := placementOf(200, func(int) string { return "a" })
	if ok, err := CreatePlacement(ctx, cli, "/t", "db", first); err != nil || !ok {
		t.Fatalf("create: %v %v", ok, err)
	}
	// A database whose name extends db's is not part of db's placement.
	if ok, err := CreatePlacement(ctx, cli, "/t", "db2", placementOf(3, func(int) string { return "c" })); err != nil || !ok {
		t.Fatalf("create db2: %v %v", ok, err)
	}
	eventually(t, "both placed", func() bool { return len(v.Placements()) == 2 })
	created, _ := v.Placement("db")
	if len(created.Revisions) != 4 || created.Version != 1 || len(created.Partitions) != 200 {
		t.Fatalf("created: version %d, %d partitions, revisions %v", created.Version, len(created.Partitions), created.Revisions)
	}

	next := placementOf(200, func(i int) string { return map[bool]string{true: "b", false: "a"}[i == 130] })
	next.Version = 2
	vals, err := EncodePlacement(first, next)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(vals)); !slices.Equal(got, []int{2}) {
		t.Fatalf("chunks encoded for one moved partition: %v, want [2]", got)
	}
	resp, err := cli.Put(ctx, PlacementKey("/t", "db", 2), vals[2])
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "version 2 seen", func() bool { p, _ := v.Placement("db"); return p.Version == 2 })
	got, _ := v.Placement("db")
	want := slices.Clone(created.Revisions)
	want[2] = resp.Header.Revision
	if !slices.Equal(got.Revisions, want) || got.ModRevision != resp.Header.Revision || got.CreateRevision != created.CreateRevision {
		t.Fatalf("revisions %v (mod %d, create %d), want %v (mod %d, create %d)", got.Revisions, got.ModRevision, got.CreateRevision, want, resp.Header.Revision, created.CreateRevision)
	}
	for i, pp := range got.Partitions {
		if pp.Leader != next.Partitions[i].Leader {
			t.Fatalf("partition %d led by %s, want %s", i, pp.Leader, next.Partitions[i].Leader)
		}
	}
	read, ok, err := ReadPlacement(ctx, cli, "/t", "db", 0)
	if err != nil || !ok || len(read.Partitions) != 200 || read.Partitions[130].Leader != "b" || !slices.Equal(read.Revisions, want) {
		t.Fatalf("ReadPlacement = %d partitions, %v, %v %v", len(read.Partitions), read.Revisions, ok, err)
	}
	init, ok, err := v.InitialPlacement(ctx, "db")
	if err != nil || !ok || init.Partitions[130].Leader != "a" {
		t.Fatalf("initial placement: %v %v, partition 130 led by %q", ok, err, init.Partitions[130].Leader)
	}
}

// TestIncompletePlacementIsHiddenAndOneKeyFormRead: a database is placed
// only once every chunk is there; a placement written whole under one key
// (before chunks) is still read.
func TestIncompletePlacementIsHiddenAndOneKeyFormRead(t *testing.T) {
	cli, v, _ := openView(t)
	ctx := context.Background()
	vals, err := EncodePlacement(Placement{}, placementOf(100, func(int) string { return "a" }))
	if err != nil || len(vals) != 2 {
		t.Fatalf("encode: %d chunks, %v", len(vals), err)
	}
	if _, err := cli.Put(ctx, PlacementKey("/t", "half", 0), vals[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/t"+PlacementDir+"old", `{"version":3,"partitions":[{"replicas":["a","b","c"],"leader":"b"}]}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, "one-key placement seen", func() bool { _, ok := v.Placement("old"); return ok })
	if _, ok := v.Placement("half"); ok {
		t.Fatal("a placement missing chunk 1 is shown")
	}
	if _, ok, err := ReadPlacement(ctx, cli, "/t", "half", 0); ok || err != nil {
		t.Fatalf("ReadPlacement of a placement missing chunk 1: %v %v", ok, err)
	}
	old, _ := v.Placement("old")
	if old.Version != 3 || old.Revisions != nil || old.Partitions[0].Leader != "b" {
		t.Fatalf("one-key placement = %+v", old)
	}
	if _, err := cli.Put(ctx, PlacementKey("/t", "half", 1), vals[1]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "completed placement seen", func() bool { p, ok := v.Placement("half"); return ok && len(p.Partitions) == 100 })
	if got := fmt.Sprint(PlacementKey("/t", "half", 1)); got != "/t/placement/half/00001" {
		t.Fatalf("PlacementKey = %s", got)
	}
}
