package clusterinfo

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/schema"
)

// TestCacheSectionSumsReadsAndJudgesBootstraps: the nodes' read sides
// come from their reports, named by their node; a table's reads are the
// sum over them; its bootstrap progress is the share of its database's
// partitions an updater of the table bootstrapped within the period (an
// updater filtered to other tables does not count); each updater
// partition shows its watermark and how old it is.
func TestCacheSectionSumsReadsAndJudgesBootstraps(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 10, 0, time.UTC)
	reads := func(local, redis, miss int64) *wire.CacheProcess {
		return &wire.CacheProcess{Role: "node", Redis: []wire.CacheEndpoint{}, Fills: map[string]map[string]int64{}, Tables: map[string]wire.CacheReads{
			"db.T": {Answered: map[string]int64{"local": local, "redis": redis, "miss": miss}, Local: wire.CacheLookups{Hit: local, Miss: redis + miss}, Redis: wire.CacheLookups{Hit: redis, Miss: miss}},
		}}
	}
	reports := []wire.LocalInfo{
		{Node: "b", Replicas: []wire.LocalReplica{}, Cache: reads(6, 2, 2)},
		{Node: "a", Replicas: []wire.LocalReplica{}, Cache: reads(2, 0, 8)},
		{Node: "c", Replicas: []wire.LocalReplica{}},
	}
	info := Assemble(nil, nil, nil, reports)
	ms := func(d time.Duration) int64 { return now.Add(-d).UnixMilli() }
	settings := schema.CacheSettings{TTL: time.Minute, BootstrapEvery: 10 * time.Second}
	AddCache(&info, CacheSources{
		Tables: []CachedTable{
			{DB: "db", Partitions: 4, Table: "U", Settings: settings, Generation: 9},
			{DB: "db", Partitions: 4, Table: "T", Settings: settings, Generation: 7},
		},
		Updaters: []Updater{
			{Status: datastream.Status{Name: "up", Database: "db", Partitions: []datastream.PartitionStatus{
				{Partition: 0, State: "running", Owner: "a", Lag: datastream.Lag{Transactions: 3},
					Cache: &datastream.CacheProgress{Watermark: ms(1500 * time.Millisecond), Bootstrapped: map[string]int64{"T": ms(time.Second)}}},
				{Partition: 1, State: "running", Owner: "b",
					Cache: &datastream.CacheProgress{Watermark: ms(time.Second), Bootstrapping: "T", Documents: 40, Bootstrapped: map[string]int64{"T": ms(11 * time.Second)}}},
				{Partition: 2, State: "unassigned"},
			}}},
			{Status: datastream.Status{Name: "other", Database: "db", Partitions: []datastream.PartitionStatus{
				{Partition: 3, State: "running", Owner: "c", Cache: &datastream.CacheProgress{Watermark: ms(0), Bootstrapped: map[string]int64{"T": ms(0), "U": ms(0)}}},
			}}, Tables: []string{"U"}},
		},
	}, now)
	got, err := json.Marshal(info.Cache)
	if err != nil {
		t.Fatal(err)
	}
	at := func(d time.Duration) *time.Time { v := now.Add(-d); return &v }
	secs := func(v float64) *float64 { return &v }
	want := wire.CacheInfo{
		Tables: []wire.CacheTable{
			{Database: "db", Table: "T", TTL: "1m0s", BootstrapEvery: "10s", Generation: 7, BootstrapProgress: 0.25, CacheReads: wire.CacheReads{
				Answered: map[string]int64{"local": 8, "redis": 2, "miss": 10},
				Local:    wire.CacheLookups{Hit: 8, Miss: 12},
				Redis:    wire.CacheLookups{Hit: 2, Miss: 10},
			}},
			{Database: "db", Table: "U", TTL: "1m0s", BootstrapEvery: "10s", Generation: 9, BootstrapProgress: 0.25, CacheReads: wire.CacheReads{Answered: map[string]int64{}}},
		},
		Processes: []wire.CacheProcess{*reports[1].Cache, *reports[0].Cache},
		Updaters: []wire.CacheUpdater{
			{Datastream: "up", Database: "db", Partition: 0, State: "running", Owner: "a", LagTransactions: 3,
				Watermark: at(1500 * time.Millisecond), LagSeconds: secs(1.5), Bootstrapped: map[string]time.Time{"T": *at(time.Second)}},
			{Datastream: "up", Database: "db", Partition: 1, State: "running", Owner: "b",
				Watermark: at(time.Second), LagSeconds: secs(1), Bootstrapping: "T", Documents: 40, Bootstrapped: map[string]time.Time{"T": *at(11 * time.Second)}},
			{Datastream: "up", Database: "db", Partition: 2, State: "unassigned"},
			{Datastream: "other", Database: "db", Partition: 3, State: "running", Owner: "c",
				Watermark: at(0), LagSeconds: secs(0), Bootstrapped: map[string]time.Time{"T": *at(0), "U": *at(0)}},
		},
	}
	want.Processes[0].Process, want.Processes[1].Process = "a", "b"
	wantJS, _ := json.Marshal(want)
	if string(got) != string(wantJS) {
		t.Errorf("cache section:\n got %s\nwant %s", got, wantJS)
	}
	if r := info.Cache.Tables[0].HitRate(); r != 0.5 {
		t.Errorf("T's hit rate %v, want 0.5 (10 of 20 reads from a tier)", r)
	}
}

// TestNoCacheSectionWithoutCache: a cluster without cacheable tables,
// read sides or updaters shows no cache section.
func TestNoCacheSectionWithoutCache(t *testing.T) {
	info := Assemble(nil, nil, nil, []wire.LocalInfo{{Node: "a", Replicas: []wire.LocalReplica{}}})
	AddCache(&info, CacheSources{}, time.Now())
	if info.Cache != nil {
		t.Errorf("cache section %+v, want none", info.Cache)
	}
}
