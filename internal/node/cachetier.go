package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/doppio-db/doppio/internal/cache"
	"github.com/doppio-db/doppio/internal/cache/tier"
	"github.com/doppio-db/doppio/internal/clusterinfo"
	"github.com/doppio-db/doppio/internal/datastream"
	"github.com/prometheus/client_golang/prometheus"
)

// CacheConfig is the cache tier's read side in a node or a router
// (docs/design/cache.md).
type CacheConfig struct {
	// Redis lists the Redis endpoints, the primary first (none: no Redis
	// tier).
	Redis []string
	// LocalBytes sizes the in-process hot-key cache (0: none).
	LocalBytes int64
	// ClockSkew is subtracted from every staleness bound (default 50 ms).
	ClockSkew time.Duration
}

// enabled reports whether any tier is configured.
func (c CacheConfig) enabled() bool { return len(c.Redis) > 0 || c.LocalBytes > 0 }

// openCacheTier opens the tiers c configures, or returns nils.
func openCacheTier(c CacheConfig, reg prometheus.Registerer, log *slog.Logger) (*tier.Tier, *cache.Store, error) {
	if !c.enabled() {
		return nil, nil, nil
	}
	var st *cache.Store
	if len(c.Redis) > 0 {
		var err error
		if st, err = cache.Open(cache.Config{Addrs: c.Redis, Registry: reg, Logger: log}); err != nil {
			return nil, nil, err
		}
	}
	t, err := tier.New(tier.Config{Store: st, LocalBytes: c.LocalBytes, ClockSkew: c.ClockSkew, Registry: reg, Logger: log})
	if err != nil {
		if st != nil {
			st.Close()
		}
		return nil, nil, err
	}
	return t, st, nil
}

// closeCacheTier closes what openCacheTier opened.
func closeCacheTier(t *tier.Tier, st *cache.Store) {
	if t != nil {
		t.Close()
	}
	if st != nil {
		_ = st.Close()
	}
}

// cacheSources are the cacheable tables and the updaters (datastreams
// with a Redis sink), for /_cluster's cache section.
func (n *Node) cacheSources(ctx context.Context) clusterinfo.CacheSources {
	var src clusterinfo.CacheSources
	if n.catalog == nil || n.streams == nil {
		return src
	}
	for _, db := range n.catalog.Databases() {
		for _, tb := range n.catalog.Tables(db.Name) {
			if tb.Def.Cacheable() {
				src.Tables = append(src.Tables, clusterinfo.CachedTable{
					DB: db.Name, Partitions: db.Partitions, Table: tb.Def.Name, Settings: *tb.Def.Cache, Generation: tb.Def.CacheGeneration,
				})
			}
		}
	}
	views, err := n.streams.List(ctx)
	if err != nil {
		return src
	}
	for _, v := range views {
		if v.Sink.Type != datastream.SinkRedis {
			continue
		}
		if st, err := n.streams.Status(ctx, v.Name); err == nil {
			src.Updaters = append(src.Updaters, clusterinfo.Updater{Status: st, Tables: v.Tables})
		}
	}
	return src
}
