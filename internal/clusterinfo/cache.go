package clusterinfo

import (
	"slices"
	"strings"
	"time"

	"github.com/doppio-db/doppio/client/wire"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/doppio-db/doppio/internal/schema"
)

// CacheSources are what /_cluster's cache section is assembled from
// besides the read sides the processes report.
type CacheSources struct {
	// Tables are the cacheable tables.
	Tables []CachedTable
	// Updaters are the datastreams with a Redis sink.
	Updaters []Updater
}

// CachedTable is a cacheable table as the catalog holds it.
type CachedTable struct {
	DB string
	// Partitions is the database's partition count.
	Partitions int
	Table      string
	Settings   schema.CacheSettings
	Generation int64
}

// Updater is a datastream with a Redis sink: its status and its table
// filter (empty: every table of its database).
type Updater struct {
	Status datastream.Status
	Tables []string
}

// AddCache fills info's cache section from the processes' reports
// (already in info.Cache.Processes, see Assemble) and src, as of now. It
// leaves info.Cache nil when there is nothing to show.
func AddCache(info *wire.ClusterInfo, src CacheSources, now time.Time) {
	if info.Cache == nil {
		if len(src.Tables) == 0 && len(src.Updaters) == 0 {
			return
		}
		info.Cache = &wire.CacheInfo{Processes: []wire.CacheProcess{}}
	}
	c := info.Cache
	c.Tables, c.Updaters = []wire.CacheTable{}, []wire.CacheUpdater{}
	for _, u := range src.Updaters {
		for _, ps := range u.Status.Partitions {
			c.Updaters = append(c.Updaters, updater(u.Status, ps, now))
		}
	}
	for _, t := range src.Tables {
		ct := wire.CacheTable{
			Database: t.DB, Table: t.Table, TTL: t.Settings.TTL.String(), BootstrapEvery: t.Settings.BootstrapEvery.String(),
			Generation: t.Generation, CacheReads: wire.CacheReads{Answered: map[string]int64{}},
		}
		for _, p := range c.Processes {
			if r, ok := p.Tables[t.DB+"."+t.Table]; ok {
				ct.Add(r)
			}
		}
		for _, u := range src.Updaters {
			if u.Status.Database == t.DB && (len(u.Tables) == 0 || slices.Contains(u.Tables, t.Table)) {
				ct.BootstrapProgress = max(ct.BootstrapProgress, bootstrapped(u.Status, t, now))
			}
		}
		c.Tables = append(c.Tables, ct)
	}
	slices.SortFunc(c.Tables, func(a, b wire.CacheTable) int {
		return strings.Compare(a.Database+"\x00"+a.Table, b.Database+"\x00"+b.Table)
	})
	slices.SortFunc(c.Processes, func(a, b wire.CacheProcess) int {
		return strings.Compare(a.Role+"\x00"+a.Process, b.Role+"\x00"+b.Process)
	})
}

// updater is one partition of an updater's status in the cache section.
func updater(st datastream.Status, ps datastream.PartitionStatus, now time.Time) wire.CacheUpdater {
	u := wire.CacheUpdater{
		Datastream: st.Name, Database: st.Database, Partition: ps.Partition, State: ps.State, Owner: ps.Owner,
		LagTransactions: ps.Lag.Transactions,
	}
	cp := ps.Cache
	if cp == nil {
		return u
	}
	if cp.Watermark > 0 {
		wm := time.UnixMilli(cp.Watermark).UTC()
		lag := max(0, now.Sub(wm).Seconds())
		u.Watermark, u.LagSeconds = &wm, &lag
	}
	u.Bootstrapping, u.Documents = cp.Bootstrapping, cp.Documents
	for table, at := range cp.Bootstrapped {
		if u.Bootstrapped == nil {
			u.Bootstrapped = map[string]time.Time{}
		}
		u.Bootstrapped[table] = time.UnixMilli(at).UTC()
	}
	return u
}

// bootstrapped is the share of t's partitions that st bootstrapped
// within t's period before now.
func bootstrapped(st datastream.Status, t CachedTable, now time.Time) float64 {
	if t.Partitions <= 0 {
		return 0
	}
	n := 0
	for _, ps := range st.Partitions {
		if ps.Cache == nil {
			continue
		}
		if at, ok := ps.Cache.Bootstrapped[t.Table]; ok && now.Sub(time.UnixMilli(at)) < t.Settings.BootstrapEvery {
			n++
		}
	}
	return float64(n) / float64(t.Partitions)
}
