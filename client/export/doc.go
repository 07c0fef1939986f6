// Package export writes a database's contents, or its change activity
// between two points, to files for ETL: one file per table and partition
// and a manifest.json that lists them.
//
// A snapshot export (Options.Since empty) reads every partition at one
// SCN through the change stream's bootstrap (GET /_changes/{db} with
// bootstrap=true, one partition per request), which the server serves
// from a follower when the partition has one: a follower's snapshot is the
// partition as of the SCN that follower has applied, and the manifest
// records that SCN and which replica was read. Each row holds the key
// parts by name and the document's fields at the table's latest schema
// version: the input the bulk build takes, so an export can be built and
// loaded again.
//
// A change export (Options.Since set to the checkpoint of an earlier
// export's manifest) reads each partition's change log from that
// checkpoint up to the SCN its leader had applied when the export began
// (GET /_cluster), and writes one row per document change: _op (insert,
// update or delete), _scn, _mtime (commit time, Unix milliseconds), the
// key parts and the after-image's fields (absent on delete). The
// manifest's checkpoint is where the next change export starts, so
// consecutive exports neither miss nor repeat a change. It is a change
// stream checkpoint, also accepted by `doppio changes tail --from`.
//
// Partitions are read Options.Parallel at a time, all of them together
// throttled to Options.Throttle bytes per second of stream read. How rows
// become bytes is a Format's job: JSONLines here, Parquet and Avro in the
// doppio command (which link libraries this client does not).
//
// The export runs in the caller's process; the server sees only change
// streams. Its progress is reported to Options.Progress, not to the
// cluster's /_cluster or /metrics.
package export
