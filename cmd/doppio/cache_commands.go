package main

import (
	"strings"
	"time"

	"github.com/doppio-db/doppio/internal/node"
	"github.com/spf13/pflag"
)

// cacheFlags are the cache tier's read-side flags of start, dev and
// router.
type cacheFlags struct {
	redis string
	local byteSize
	skew  time.Duration
}

func (f *cacheFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.redis, "cache-redis", "", "the cache tier's Redis, host:port[,host:port...]: the primary first, then its replicas (empty = no Redis tier)")
	fl.Var(&f.local, "cache-local-bytes", "memory for the in-process hot-key cache of cacheable tables, e.g. 64MB (0 = none)")
	fl.DurationVar(&f.skew, "cache-clock-skew", 50*time.Millisecond, "clock difference between nodes and routers subtracted from every staleness bound a cache answers")
}

func (f *cacheFlags) config() node.CacheConfig {
	c := node.CacheConfig{LocalBytes: int64(f.local), ClockSkew: f.skew}
	if c.ClockSkew == 0 {
		c.ClockSkew = -1 // none, where node.CacheConfig's zero is its default
	}
	for _, a := range strings.Split(f.redis, ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.Redis = append(c.Redis, a)
		}
	}
	return c
}
