package clusterinfo

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/membership"
	"github.com/doppio-db/doppio/internal/replication"
	"github.com/doppio-db/doppio/internal/schema"
)

// Availability counts a cluster's partitions that cannot serve
// (Unavailable: no live node publishes itself as their leader) and those
// that serve with less redundancy than asked for (UnderReplicated: their
// leader's Raft configuration has fewer live voters than the database's
// replication factor).
type Availability struct {
	Unavailable, UnderReplicated int
}

// Assess counts the unavailable and under-replicated partitions of dbs
// from what the live nodes publish: leaderships and, from each leader,
// its Raft group's configuration. A partition whose leader has not yet
// published its configuration counts as neither.
func Assess(dbs []schema.Database, live map[string]bool, leaders map[string]membership.Leaderships, groups map[string]membership.Groups) Availability {
	var a Availability
	for _, d := range dbs {
		for p := range d.Partitions {
			led := false
			for id, l := range leaders {
				if _, ok := l[d.Name][p]; ok && live[id] {
					led = true
					break
				}
			}
			if !led {
				a.Unavailable++
				continue
			}
			// The highest term's report is the current leader's.
			var report membership.GroupReport
			reported := false
			for id, gs := range groups {
				if r, ok := gs[d.Name][p]; ok && live[id] && (!reported || r.Term > report.Term) {
					report, reported = r, true
				}
			}
			if !reported {
				continue
			}
			voters := 0
			for _, v := range report.Voters {
				if live[v] {
					voters++
				}
			}
			if voters < d.Replicas {
				a.UnderReplicated++
			}
		}
	}
	return a
}

// HealthSources are what the health collector reads at each scrape.
type HealthSources struct {
	// Host summarizes the replicas hosted here (*replication.Host).
	Host interface {
		Health() (replication.Health, error)
	}
	// Database names the database of a partition hosted here.
	Database func(keys.Partition) (string, bool)
	// Databases lists the catalog's databases.
	Databases func() []schema.Database
	// Cluster is the published cluster state (*membership.View).
	Cluster interface {
		Nodes() []membership.Node
		Leaderships() map[string]membership.Leaderships
		Groups() map[string]membership.Groups
	}
	// Controlling reports whether this node runs the active controller,
	// the one node that exports the cluster-wide counts.
	Controlling func() bool
	// DataDir is the directory whose file system's space is reported.
	DataDir string
}

type healthCollector struct {
	src             HealthSources
	replicas        *prometheus.Desc
	leading         *prometheus.Desc
	leaderless      *prometheus.Desc
	underReplicated *prometheus.Desc
	lag             *prometheus.Desc
	leaderChanges   *prometheus.Desc
	controller      *prometheus.Desc
	unavailable     *prometheus.Desc
	clusterUnder    *prometheus.Desc
	diskFree        *prometheus.Desc
	diskTotal       *prometheus.Desc
	clock           *prometheus.Desc
}

// NewHealthCollector returns the collector of the node's leadership,
// replication and disk health and, on the active controller's node, of
// the cluster's unavailable and under-replicated partitions. Each series
// is one number per node, so a scrape stays small however many replicas
// the node hosts.
func NewHealthCollector(src HealthSources) prometheus.Collector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &healthCollector{
		src:             src,
		replicas:        d("doppio_replicas", "Partition replicas hosted on this node."),
		leading:         d("doppio_replicas_leading", "Partition replicas on this node that lead their Raft group, ready to take writes."),
		leaderless:      d("doppio_replicas_leaderless", "Partition replicas on this node that know of no leader: their partition cannot take writes until one is elected."),
		underReplicated: d("doppio_replicas_under_replicated", "Partitions led on this node whose Raft group has fewer live voters than their database's replication factor."),
		lag:             d("doppio_replication_follower_lag_max_entries", "Most log entries any follower or learner of a Raft group led on this node is behind its leader."),
		leaderChanges:   d("doppio_replication_leader_changes_total", "Leaders the replicas on this node learned of: a new leader, or a new term with a leader, counts once per replica."),
		controller:      d("doppio_controller_active", "1 when this node runs the active placement controller, else 0."),
		unavailable:     d("doppio_cluster_partitions_unavailable", "Partitions without a live leader, cluster-wide; exported by the active controller's node only."),
		clusterUnder:    d("doppio_cluster_partitions_under_replicated", "Partitions whose Raft group has fewer live voters than their replication factor, cluster-wide; exported by the active controller's node only."),
		diskFree:        d("doppio_storage_disk_free_bytes", "Bytes available to the node on the file system of its data directory."),
		diskTotal:       d("doppio_storage_disk_capacity_bytes", "Size of the file system of the node's data directory."),
		clock:           d("doppio_time_seconds", "The node's wall clock at the scrape, in seconds since the Unix epoch: its difference from the scrape's timestamp is the node's clock offset from the scraper's."),
	}
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.replicas, c.leading, c.leaderless, c.underReplicated, c.lag, c.leaderChanges, c.controller, c.unavailable, c.clusterUnder, c.diskFree, c.diskTotal, c.clock} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	gauge(c.clock, float64(time.Now().UnixNano())/1e9)
	dbs := c.src.Databases()
	if h, err := c.src.Host.Health(); err == nil {
		factor := make(map[string]int, len(dbs))
		for _, d := range dbs {
			factor[d.Name] = d.Replicas
		}
		under := 0
		for _, g := range h.Led {
			if db, ok := c.src.Database(g.Partition); ok && g.LiveVoters < factor[db] {
				under++
			}
		}
		gauge(c.replicas, float64(h.Replicas))
		gauge(c.leading, float64(h.Leaders))
		gauge(c.leaderless, float64(h.Leaderless))
		gauge(c.underReplicated, float64(under))
		gauge(c.lag, float64(h.MaxFollowerLag))
		ch <- prometheus.MustNewConstMetric(c.leaderChanges, prometheus.CounterValue, float64(h.LeaderChanges))
	}
	if c.src.Controlling() {
		gauge(c.controller, 1)
		live := map[string]bool{}
		for _, n := range c.src.Cluster.Nodes() {
			live[n.ID] = true
		}
		a := Assess(dbs, live, c.src.Cluster.Leaderships(), c.src.Cluster.Groups())
		gauge(c.unavailable, float64(a.Unavailable))
		gauge(c.clusterUnder, float64(a.UnderReplicated))
	} else {
		gauge(c.controller, 0)
	}
	if free, total, ok := diskSpace(c.src.DataDir); ok {
		gauge(c.diskFree, float64(free))
		gauge(c.diskTotal, float64(total))
	}
}
