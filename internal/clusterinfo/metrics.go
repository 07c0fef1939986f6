package clusterinfo

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/doppio-db/doppio/internal/partition"
	"github.com/doppio-db/doppio/internal/storage"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Partitions yields the partition replicas open here by database
// (*router.Router).
type Partitions interface {
	All() map[string][]*partition.Replica
}

// Storage is the node's storage engine (*storage.Engine).
type Storage interface {
	Metrics() *pebble.Metrics
	RowCacheStats() storage.RowCacheStats
}

// Replication is the node's replication host (*replication.Host).
type Replication interface {
	// SnapshotsSent counts the snapshots streamed in full and their bytes.
	SnapshotsSent() (count, bytes uint64)
	// Reads counts linearizable read confirmations by how they were made.
	Reads() (lease, round, sole uint64)
}

// collector exports storage and partition state at scrape time.
type collector struct {
	partitions Partitions
	storage    Storage
	host       Replication
	diskBytes  *prometheus.Desc
	walBytes   *prometheus.Desc
	compaction *prometheus.Desc
	compacting *prometheus.Desc
	debt       *prometheus.Desc
	snapshots  *prometheus.Desc
	snapBytes  *prometheus.Desc
	rowHits    *prometheus.Desc
	rowMisses  *prometheus.Desc
	rowBytes   *prometheus.Desc
	reads      *prometheus.Desc
	walSync    *prometheus.Desc
	folds      *prometheus.Desc
	folded     *prometheus.Desc
	purged     *prometheus.Desc
}

// NewCollector returns the collector of the node's storage and
// partition metrics, read from its sources at each scrape.
func NewCollector(partitions Partitions, storage Storage, host Replication) prometheus.Collector {
	return &collector{
		partitions: partitions,
		storage:    storage,
		host:       host,
		diskBytes:  prometheus.NewDesc("doppio_storage_disk_bytes", "Bytes the storage engine uses on disk.", nil, nil),
		walBytes:   prometheus.NewDesc("doppio_storage_wal_bytes", "Bytes written to the write-ahead log.", nil, nil),
		compaction: prometheus.NewDesc("doppio_storage_compactions_total", "Compactions the storage engine ran.", nil, nil),
		compacting: prometheus.NewDesc("doppio_storage_compactions_in_progress", "Compactions the storage engine is running now.", nil, nil),
		debt:       prometheus.NewDesc("doppio_storage_compaction_debt_bytes", "Bytes the storage engine estimates it must compact to reach a settled LSM shape.", nil, nil),
		snapshots:  prometheus.NewDesc("doppio_snapshots_sent_total", "Snapshots this node streamed in full to replicas being added (replica moves, lagging followers).", nil, nil),
		snapBytes:  prometheus.NewDesc("doppio_snapshot_sent_bytes_total", "Sstable bytes this node streamed in snapshots.", nil, nil),
		rowHits:    prometheus.NewDesc("doppio_row_cache_hits_total", "Document reads answered by the row cache.", nil, nil),
		rowMisses:  prometheus.NewDesc("doppio_row_cache_misses_total", "Document reads the row cache could not answer (read from Pebble).", nil, nil),
		rowBytes:   prometheus.NewDesc("doppio_row_cache_bytes", "Bytes held by the row cache.", nil, nil),
		walSync:    prometheus.NewDesc("doppio_storage_wal_sync_seconds", "Duration of the storage engine's write-ahead log syncs (each makes every write waiting for it durable).", nil, nil),
		reads:      prometheus.NewDesc("doppio_linearizable_reads_total", "Linearizable read confirmations by how they were confirmed: under the leader's lease, by a quorum round (ReadIndex), or as the partition's only voter.", []string{"confirmed"}, nil),
		folds:      prometheus.NewDesc("doppio_index_folds_total", "Write sets that folded pending text index entries into segments, summed over the database's partitions hosted here, each while it led.", []string{"database"}, nil),
		folded:     prometheus.NewDesc("doppio_index_folded_documents_total", "Documents whose pending text index entries were folded into segments, summed over the database's partitions hosted here, each while it led.", []string{"database"}, nil),
		purged:     prometheus.NewDesc("doppio_index_purged_postings_total", "Dead postings of segments purged from their posting blocks, summed over the database's partitions hosted here, each while it led.", []string{"database"}, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.diskBytes
	ch <- c.walBytes
	ch <- c.compaction
	ch <- c.compacting
	ch <- c.debt
	ch <- c.snapshots
	ch <- c.snapBytes
	ch <- c.rowHits
	ch <- c.rowMisses
	ch <- c.rowBytes
	ch <- c.reads
	ch <- c.walSync
	ch <- c.folds
	ch <- c.folded
	ch <- c.purged
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	// Summed by database, not one series per partition: a node hosting a
	// thousand replicas would otherwise export thousands of series.
	for db, ps := range c.partitions.All() {
		var writes, docs, purged int64
		for _, p := range ps {
			w, d, pu := p.FoldStats()
			writes, docs, purged = writes+w, docs+d, purged+pu
		}
		ch <- prometheus.MustNewConstMetric(c.folds, prometheus.CounterValue, float64(writes), db)
		ch <- prometheus.MustNewConstMetric(c.folded, prometheus.CounterValue, float64(docs), db)
		ch <- prometheus.MustNewConstMetric(c.purged, prometheus.CounterValue, float64(purged), db)
	}
	m := c.storage.Metrics()
	ch <- prometheus.MustNewConstMetric(c.diskBytes, prometheus.GaugeValue, float64(m.DiskSpaceUsage()))
	ch <- prometheus.MustNewConstMetric(c.walBytes, prometheus.CounterValue, float64(m.WAL.BytesWritten))
	ch <- prometheus.MustNewConstMetric(c.compaction, prometheus.CounterValue, float64(m.Compact.Count))
	ch <- prometheus.MustNewConstMetric(c.compacting, prometheus.GaugeValue, float64(m.Compact.NumInProgress))
	ch <- prometheus.MustNewConstMetric(c.debt, prometheus.GaugeValue, float64(m.Compact.EstimatedDebt))
	sent, bytes := c.host.SnapshotsSent()
	ch <- prometheus.MustNewConstMetric(c.snapshots, prometheus.CounterValue, float64(sent))
	ch <- prometheus.MustNewConstMetric(c.snapBytes, prometheus.CounterValue, float64(bytes))
	rows := c.storage.RowCacheStats()
	ch <- prometheus.MustNewConstMetric(c.rowHits, prometheus.CounterValue, float64(rows.Hits))
	ch <- prometheus.MustNewConstMetric(c.rowMisses, prometheus.CounterValue, float64(rows.Misses))
	ch <- prometheus.MustNewConstMetric(c.rowBytes, prometheus.GaugeValue, float64(rows.Bytes))
	lease, round, sole := c.host.Reads()
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(lease), "lease")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(round), "quorum")
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(sole), "sole-voter")
	if h := m.LogWriter.FsyncLatency; h != nil {
		if sync, err := inSeconds(c.walSync, h); err == nil {
			ch <- sync
		}
	}
}

// syncBounds are about the bucket bounds (seconds) the WAL sync histogram
// is exported with; Pebble keeps a hundred finer ones, in nanoseconds.
var syncBounds = []float64{100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10}

// inSeconds exports h, a histogram of nanoseconds, as one of seconds under
// desc, with fewer buckets: for each of syncBounds, the largest bucket of h
// within it, at that bucket's own bound (so every count is exact).
func inSeconds(desc *prometheus.Desc, h prometheus.Histogram) (prometheus.Metric, error) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return nil, err
	}
	hist := m.GetHistogram()
	buckets := make(map[float64]uint64, len(syncBounds))
	for _, want := range syncBounds {
		var at *dto.Bucket
		for _, b := range hist.GetBucket() {
			if b.GetUpperBound()/1e9 > want*(1+1e-9) {
				break
			}
			at = b
		}
		if at != nil {
			buckets[at.GetUpperBound()/1e9] = at.GetCumulativeCount()
		}
	}
	return prometheus.NewConstHistogram(desc, hist.GetSampleCount(), hist.GetSampleSum()/1e9, buckets)
}
