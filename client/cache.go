package client

import (
	"context"

	"github.com/doppio-db/doppio/client/wire"
)

// CacheInfo is the cache tier as GET /_cluster reports it: the cacheable
// tables with their reads and bootstrap progress, every read side's
// hot-key cache, Redis endpoints and fills, and the updater's partitions
// with their watermarks and lag.
type CacheInfo = wire.CacheInfo

// CacheStatus returns the cache tier's state: the cache section of
// /_cluster. Asked through a router, it includes that router's read side.
// Without a cacheable table, a read side or an updater it is empty (no
// tables, processes or updaters), not an error.
func (c *Client) CacheStatus(ctx context.Context) (CacheInfo, error) {
	info, err := c.Cluster(ctx)
	if err != nil {
		return CacheInfo{}, err
	}
	if info.Cache == nil {
		return CacheInfo{Tables: []wire.CacheTable{}, Processes: []wire.CacheProcess{}, Updaters: []wire.CacheUpdater{}}, nil
	}
	return *info.Cache, nil
}
