// Package quota limits how much work each database and each user may ask
// of the cluster, in capacity units per second, and refuses what is over
// the limit before it changes anything.
//
// # Units
//
// A unit counts bytes the storage node processes for a request, as
// Espresso's RCU and WCU do, with DynamoDB's sizes:
//
//   - 1 read unit (RCU) is up to 4 KiB read: the stored documents (key
//     and Avro bytes) a read, a list or a query reads, and the index
//     entry of each document a query lists. Every read request costs at
//     least 1 RCU, found or not.
//   - 1 write unit (WCU) is up to 1 KiB written: the size of the write set
//     the partition's leader replicates (document post-images, the
//     pre-images the change log keeps, index entries added and removed,
//     counters). Every write request the leader evaluates costs at least
//     1 WCU, even one whose condition fails or that changes nothing.
//
// ReadUnits and WriteUnits round up: a 1 KiB document read is 1 RCU; a
// 1 KiB document created in a table with no index is slightly more than
// 1 KiB of write set (key, record header, framing), so 2 WCU.
//
// # Enforcement
//
// A Quota is read and write units per second, 0 meaning unlimited, set per
// database and per user and stored in etcd (Store); every node watches
// them. Each node enforces its share of a quota with token buckets
// (Bucket), on the partition leader, where the work happens: for a
// database, the share of the database's partitions this node leads; for a
// user, the share of all partitions it leads (at least one partition's
// worth on any node that serves a request, so a follower serving a stale
// read is never starved). When leaderships are spread evenly the shares
// add up to the whole quota without any exchange between nodes per
// request, as early DynamoDB divided a table's throughput among its
// partitions. A hot partition on its own therefore gets less than the
// whole quota; that is the price of needing no coordination.
//
// A bucket refills at its rate and holds at most Burst (default 10 s) of
// unused capacity, so a tenant idle for a while may go faster for a
// moment. A request is admitted while its buckets hold credit, runs, and
// is then charged what it actually cost: a bucket may go into debt, and
// the requests after it are refused until the debt is repaid. So a request
// larger than the burst is never refused forever, and nobody has to guess
// a cost before the work. A refused request gets a 429 problem with
// Retry-After: the seconds until its buckets hold credit again, rounded
// up.
//
// # What is charged
//
// Only requests of tenants, served by the REST API: document reads, lists,
// multi-gets, queries, writes, transactions and batches. The caller's user
// comes from auth.CallerFrom; with no user (an insecure node) only the
// database's quota applies. Background work never passes through the
// charged paths and keeps its own limits: index backfills, folds and
// purges run inside the partition replica; consistency checks, backups,
// restores and datastreams read and write replicas directly. The change
// stream (GET /_changes) is not charged either.
//
// # Metrics
//
// doppio_quota_consumed_units_total{scope, name, unit} counts the units
// charged on this node (scope "database" or "user", unit "read" or
// "write"); doppio_quota_throttled_requests_total{scope, name} counts the
// requests refused. A user appears only while a quota is set for that
// user, so the series grow with the quotas set, not with the users that
// send requests; databases are bounded by the catalog.
package quota
