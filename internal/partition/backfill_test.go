package partition

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/problem"
	"github.com/doppio-db/doppio/internal/schema"
)

func versioned(t *testing.T, schemas ...string) *schema.Table {
	t.Helper()
	def := schema.TableDef{Database: "db", Name: "Msg", Key: []schema.KeyPart{{Name: "box", Type: "string"}, {Name: "id", Type: "long"}}}
	for i, s := range schemas {
		def.Versions = append(def.Versions, schema.Version{Version: i + 1, Schema: json.RawMessage(s), Created: time.Now()})
	}
	tb, err := schema.Compile(def)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

const (
	msgV1 = `{"type":"record","name":"M","fields":[{"name":"tag","type":"string"},{"name":"n","type":"long"}]}`
	msgV2 = `{"type":"record","name":"M","fields":[{"name":"tag","type":"string","index":"attribute"},{"name":"n","type":"long"}]}`
)

func waitReady(t *testing.T, r *Replica, table, field string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !r.IndexState(table, field).Ready {
		if time.Now().After(deadline) {
			t.Fatalf("index %s.%s not ready: %+v", table, field, r.IndexState(table, field))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBackfillIndexesExistingDocumentsWhileWritesGoOn(t *testing.T) {
	f := newFixture(t)
	v1, v2 := versioned(t, msgV1), versioned(t, msgV1, msgV2)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); f.rep.WaitIndexJobs() }()
	log := slog.New(slog.DiscardHandler)
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{v1}, log); err != nil {
		t.Fatal(err)
	}
	const groups, per = 40, 50
	for g := range groups {
		var ops []Operation
		for i := range per {
			ops = append(ops, put(v1, keys.Tuple{fmt.Sprint("b", g), int64(i)}, schema.Document{"tag": fmt.Sprint("t", i%3), "n": int64(i)}))
		}
		f.exec(t, ops...)
	}

	f.rep.limits.BackfillRate = 1000 // about two seconds for 2,000 documents
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{v2}, log); err != nil {
		t.Fatal(err)
	}
	if st := f.rep.IndexState("Msg", "tag"); st.Ready || !st.Building {
		t.Fatalf("right after the new version: %+v", st)
	}
	// A request resolved against the old version is refused, not applied.
	_, err := f.rep.Execute(ctx, Request{Ops: []Operation{put(v1, keys.Tuple{"b0", int64(0)}, schema.Document{"tag": "x", "n": int64(0)})}})
	if err != ErrSchemaChanged || !problem.Is(err, problem.Unavailable) {
		t.Fatalf("old-version write during the build: %v", err)
	}
	// Writes at the new version go on during the build and index themselves.
	var wg sync.WaitGroup
	for g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i += 7 {
				op := Operation{Kind: Patch, Table: v2, Key: keys.Tuple{fmt.Sprint("b", g), int64(i)}, Patch: schema.Patch{Set: map[string]any{"tag": "moved"}}}
				if _, err := f.rep.Execute(ctx, Request{Ops: []Operation{op}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitReady(t, f.rep, "Msg", "tag")
	if st := f.rep.IndexState("Msg", "tag"); st.Total != groups*per || st.Done != st.Total || st.Progress() != 1 {
		t.Fatalf("finished build reports %+v", st)
	}

	for g := range groups {
		box := fmt.Sprint("b", g)
		for _, tag := range []string{"t0", "t1", "t2", "moved"} {
			var want []int64
			for i := range per {
				cur := fmt.Sprint("t", i%3)
				if i%7 == 0 {
					cur = "moved"
				}
				if cur == tag {
					want = append(want, int64(i))
				}
			}
			if got := queryIDs(t, f, v2, box, "tag:"+tag, ""); !slices.Equal(got, want) {
				t.Fatalf("%s tag:%s = %v, want %v", box, tag, got, want)
			}
		}
	}

	// Dropping the index removes its entries in the background.
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{versioned(t, msgV1, msgV2, msgV1)}, log); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		start := f.rep.prefix.IndexTable("Msg")
		it, _ := f.engine.NewIter(start, keys.PrefixEnd(start))
		left := it.First()
		it.Close()
		if !left {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("entries of the dropped index are still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestIndexOnEmptyTableIsReadyAtOnceAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	f := open(t, dir)
	v2 := versioned(t, msgV1, msgV2)
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.rep.SyncIndexes(ctx, []*schema.Table{v2}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if !f.rep.IndexState("Msg", "tag").Ready {
		t.Fatal("index of an empty table is not ready at once")
	}
	cancel()
	f.rep.WaitIndexJobs()
	f.engine.Close()
	f = open(t, dir)
	defer f.engine.Close()
	if err := f.rep.SyncIndexes(context.Background(), []*schema.Table{v2}, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	if !f.rep.IndexState("Msg", "tag").Ready {
		t.Fatal("a ready index is not ready after a restart")
	}
}
