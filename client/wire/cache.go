package wire

import "time"

// CacheInfo is the cache tier in GET /_cluster (docs/design/cache.md):
// the cacheable tables, every process's read side and the updater's
// partitions. Absent when no table is cacheable, no process runs a tier
// and no datastream has a Redis sink.
type CacheInfo struct {
	// Tables are the cacheable tables, with their reads summed over
	// Processes and their bootstrap progress.
	Tables []CacheTable `json:"tables"`
	// Processes are the nodes that run a read side of the tier (with
	// --cache-redis or --cache-local-bytes) and, when /_cluster is asked
	// through a router that runs one, that router.
	Processes []CacheProcess `json:"processes"`
	// Updaters are the partitions of every datastream with a Redis sink:
	// how far each has brought the tier.
	Updaters []CacheUpdater `json:"updaters"`
}

// CacheTable is one cacheable table in CacheInfo.
type CacheTable struct {
	Database string `json:"database"`
	Table    string `json:"table"`
	// TTL and BootstrapEvery are the table's settings, as Go durations.
	TTL            string `json:"ttl"`
	BootstrapEvery string `json:"bootstrapEvery"`
	// Generation is the table's cache generation (part of every key).
	Generation int64 `json:"generation"`
	CacheReads
	// BootstrapProgress is the share (0 to 1) of the database's
	// partitions whose entries of this table were all rewritten from a
	// snapshot within the last BootstrapEvery.
	BootstrapProgress float64 `json:"bootstrapProgress"`
}

// CacheReads counts staleness-bounded reads of one document of a table.
type CacheReads struct {
	// Answered counts reads by what answered them: local, redis, miss
	// (the nodes, then both tiers filled) or bypass (the nodes; Redis
	// unhealthy or failing).
	Answered map[string]int64 `json:"answered"`
	// Local and Redis are each tier's lookups.
	Local CacheLookups `json:"local"`
	Redis CacheLookups `json:"redis"`
}

// HitRate is the share of the reads a tier answered, 0 without reads.
func (r CacheReads) HitRate() float64 {
	var all int64
	for _, n := range r.Answered {
		all += n
	}
	if all == 0 {
		return 0
	}
	return float64(r.Answered["local"]+r.Answered["redis"]) / float64(all)
}

// Add adds o's counts to r's.
func (r *CacheReads) Add(o CacheReads) {
	if r.Answered == nil {
		r.Answered = map[string]int64{}
	}
	for k, n := range o.Answered {
		r.Answered[k] += n
	}
	r.Local.add(o.Local)
	r.Redis.add(o.Redis)
}

// CacheLookups are one tier's lookups: entries fresh enough (hit),
// present but too old for the read's bound (stale), and absent (miss).
type CacheLookups struct {
	Hit   int64 `json:"hit"`
	Stale int64 `json:"stale"`
	Miss  int64 `json:"miss"`
}

// HitRate is the share of the lookups that hit, 0 without lookups.
func (l CacheLookups) HitRate() float64 {
	if n := l.Hit + l.Stale + l.Miss; n > 0 {
		return float64(l.Hit) / float64(n)
	}
	return 0
}

func (l *CacheLookups) add(o CacheLookups) {
	l.Hit += o.Hit
	l.Stale += o.Stale
	l.Miss += o.Miss
}

// CacheProcess is one process's read side of the tier.
type CacheProcess struct {
	// Process is the node's id, or the router's.
	Process string `json:"process"`
	// Role is "node" or "router".
	Role string `json:"role"`
	// Local is the hot-key cache; absent when the process runs none.
	Local *CacheLocal `json:"local,omitempty"`
	// Redis is each Redis endpoint as this process judges it, the
	// primary first; empty without a Redis tier.
	Redis []CacheEndpoint `json:"redis"`
	// Tables are the reads served here, by "db.table".
	Tables map[string]CacheReads `json:"tables"`
	// Fills counts the entries written after misses, by tier (local,
	// redis) and result: written, merged (same SCN), refused (a newer
	// SCN was there), stale_epoch (read before the Redis incarnation
	// began) or dropped (Redis unhealthy, or the queue full).
	Fills map[string]map[string]int64 `json:"fills"`
}

// CacheLocal is a hot-key cache's size.
type CacheLocal struct {
	Entries  int    `json:"entries"`
	Bytes    uint64 `json:"bytes"`
	MaxBytes uint64 `json:"maxBytes"`
}

// CacheEndpoint is one Redis endpoint and a process's judgement of it:
// an unhealthy one gets only probes.
type CacheEndpoint struct {
	Addr    string `json:"addr"`
	Primary bool   `json:"primary"`
	Healthy bool   `json:"healthy"`
}

// CacheUpdater is one partition of a datastream with a Redis sink: the
// cache tier's updater and bootstrapper for that partition.
type CacheUpdater struct {
	Datastream string `json:"datastream"`
	Database   string `json:"database"`
	Partition  int    `json:"partition"`
	// State and Owner are the task's, as in the datastream status.
	State string `json:"state"`
	Owner string `json:"owner,omitempty"`
	// Watermark is the partition's watermark as last raised: every
	// change committed before it is in the tier. Absent before the first.
	Watermark *time.Time `json:"watermark,omitempty"`
	// LagSeconds is how old the watermark is now; LagTransactions how
	// many committed write sets the updater has not delivered yet.
	LagSeconds      *float64 `json:"lagSeconds,omitempty"`
	LagTransactions uint64   `json:"lagTransactions"`
	// Bootstrapping names the table being bootstrapped now, with its
	// documents rewritten so far.
	Bootstrapping string `json:"bootstrapping,omitempty"`
	Documents     int64  `json:"documents,omitempty"`
	// Bootstrapped is when each table's last complete bootstrap of the
	// partition started.
	Bootstrapped map[string]time.Time `json:"bootstrapped,omitempty"`
}
