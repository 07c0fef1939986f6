package datastream_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/redistest"
	"github.com/doppio-db/doppio/internal/testwait"
)

// cacheRef names the cache entry of shop's document (group, id) in table.
func cacheRef(t *testing.T, n *testNode, table, group string, id int64) cache.Ref {
	t.Helper()
	var v struct {
		CacheGeneration int64 `json:"cacheGeneration"`
	}
	if err := json.Unmarshal(n.must(200, "GET", "/_schemas/shop/"+table, nil), &v); err != nil {
		t.Fatal(err)
	}
	k, err := keys.EncodeTuple(keys.Tuple{group, id})
	if err != nil {
		t.Fatal(err)
	}
	var cl struct {
		Partitions int `json:"partitions"`
	}
	if err := json.Unmarshal(n.must(200, "GET", "/_schemas/shop", nil), &cl); err != nil {
		t.Fatal(err)
	}
	pk, err := keys.EncodeTuple(keys.Tuple{group})
	if err != nil {
		t.Fatal(err)
	}
	p := keys.PartitionOf(pk, cl.Partitions)
	return cache.Ref{DB: "shop", Generation: v.CacheGeneration, Table: table, Partition: p, Key: k}
}

// waitEntry polls until the entry r names satisfies ok.
func waitEntry(t *testing.T, st *cache.Store, r cache.Ref, what string, ok func(e cache.Entry, wm int64, err error) bool) cache.Entry {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		e, wm, err := st.Get(context.Background(), r)
		if ok(e, wm, err) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: entry %+v watermark %d err %v", what, e, wm, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestRedisSinkKeepsTheCacheInStepWithCommits runs the cache updater, a
// datastream with a Redis sink, against a real node and a real Redis:
// every change of a cacheable table lands with its SCN (a delete as a
// tombstone), a table that is not cacheable writes nothing, the
// partition's watermark passes the last commit while nothing changes,
// the checkpoint waits for a Redis that is down, and a Redis that lost
// everything is refilled by the next bootstrap.
func TestRedisSinkKeepsTheCacheInStepWithCommits(t *testing.T) {
	n := startNode(t)
	setupShop(n, 2)
	rc := redistest.Start(t, 0)
	n.must(200, "PUT", "/_schemas/shop/Order", `{"cache":{"ttl":"1m","bootstrapEvery":"1s"}}`)
	n.must(201, "PUT", "/_datastreams/updater", map[string]any{
		"database": "shop", "from": "earliest",
		"sink":      map[string]any{"type": "redis", "addresses": rc.Addrs()},
		"autoPause": map[string]any{"failures": 1000},
	})
	st, err := cache.Open(cache.Config{Addrs: rc.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	put := n.commit("g1", []op{{Table: "Order", ID: 1}, {Table: "Item", ID: 1}}, 10)
	upd := n.commit("g1", []op{{Table: "Order", ID: 1}}, 20)
	order := cacheRef(t, n, "Order", "g1", 1)
	e := waitEntry(t, st, order, "the update", func(e cache.Entry, _ int64, err error) bool { return err == nil && e.SCN == upd.SCN })
	if e.Tombstone() || e.Version != 1 || len(e.Data) == 0 || e.Mtime <= 0 || e.AsOf < e.Mtime {
		t.Fatalf("updated document's entry %+v", e)
	}
	if put.SCN == upd.SCN {
		t.Fatal("two commits with one SCN")
	}
	if _, _, err := st.Get(context.Background(), cacheRef(t, n, "Item", "g1", 1)); !errors.Is(err, cache.ErrMiss) {
		t.Fatalf("a table that is not cacheable has an entry: %v", err)
	}
	del := n.commit("g1", []op{{Table: "Order", ID: 1, Delete: true}}, 0)
	waitEntry(t, st, order, "the delete's tombstone", func(e cache.Entry, _ int64, err error) bool {
		return err == nil && e.SCN == del.SCN && e.Tombstone()
	})
	// Quiet now: the watermark passes the delete's commit and keeps
	// moving.
	committed := time.Now()
	waitEntry(t, st, order, "the watermark", func(_ cache.Entry, wm int64, _ error) bool { return wm > committed.UnixMilli() })
	// The owner publishes its status every StatusInterval or on a change
	// of state: the watermark shows within that.
	var p datastream.PartitionStatus
	testwait.Until(t, 10*time.Second, "the partition's status shows the watermark", func() bool {
		p = n.status("updater").Partitions[order.Partition]
		return p.Cache != nil && p.Cache.Watermark > 0
	})

	// Redis down: the change waits, the checkpoint does not pass it.
	rc.Primary.Kill()
	before := n.status("updater").Partitions[order.Partition].Checkpoint
	late := n.commit("g1", []op{{Table: "Order", ID: 2}}, 0)
	time.Sleep(time.Second)
	if cp := n.status("updater").Partitions[order.Partition].Checkpoint; cp != before {
		at, err := partition.ParseSCN(cp)
		if err != nil || !at.Less(late.SCN) {
			t.Fatalf("checkpoint %s passed %s while Redis was down (was %s)", cp, late.SCN, before)
		}
	}
	// Back, empty: the change is delivered again, and the bootstrap
	// rewrites what the restart lost.
	rc.Primary.Restart(t)
	st2, err := cache.Open(cache.Config{Addrs: rc.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	waitEntry(t, st2, cacheRef(t, n, "Order", "g1", 2), "the change committed while Redis was down", func(e cache.Entry, _ int64, err error) bool {
		return err == nil && e.SCN == late.SCN && !e.Tombstone()
	})
	n.commit("g2", []op{{Table: "Order", ID: 3}}, 0)
	rc.Primary.Restart(t)
	restarted := time.Now()
	waitEntry(t, st2, cacheRef(t, n, "Order", "g2", 3), "the bootstrap after Redis lost everything", func(e cache.Entry, _ int64, err error) bool {
		return err == nil && !e.Tombstone() && e.AsOf >= restarted.Add(-time.Second).UnixMilli()
	})
	// Read in the new incarnation, the bootstrap's entry is one its
	// watermark vouches for.
	waitEntry(t, st2, cacheRef(t, n, "Order", "g2", 3), "the watermark vouching for the bootstrap's entry", func(e cache.Entry, wm int64, err error) bool {
		return err == nil && e.Vouched(wm, 0) > restarted.UnixMilli()
	})
	testwait.Until(t, 10*time.Second, "a partition's status shows a bootstrap of Order", func() bool {
		for _, p := range n.status("updater").Partitions {
			if p.Cache != nil && p.Cache.Bootstrapped["Order"] > 0 {
				return true
			}
		}
		return false
	})
}
