// Package derived serves read-only derived tables in versions, as
// Voldemort's read-only stores do: a batch job builds each version, every
// replica fetches its part while the previous version serves, and one
// compare-and-swap in etcd makes it current for the whole table
// (docs/design/derived.md).
//
// Version N of table T is stored as the table schema.VersionTable(T, N)
// ("T@N") in every partition, written by a bulk load (internal/bulkload,
// Manager.StartInto) and read by the ordinary read path once a read has
// picked its version (Resolve). A version moves through
//
//	fetching → staged → current ⇄ backup → deleting → gone
//	fetching → failed → gone
//
// as decided by Next, a pure function of the table's record, its loads'
// states, the placement and the nodes' reports. Every node's Manager
// runs the same loop: on each etcd change and every Config.Interval it
// moves each table with Next (the node whose compare-and-swap lands
// wins), deletes the expired versions of the partitions it leads
// (partition.Replica.DropTable, range deletions through Raft), and
// reports per table which of its replicas hold each fetching version
// whole (the load's mark done in that replica) or none of each version
// being deleted, with the record's revision it serves. A version is
// staged only when every placed replica of every partition holds it; it
// is gone only when every one is empty of it; a swap is announced once
// every live node reports serving it.
//
// Layout in etcd under the prefix:
//
//	{prefix}/derived/tables/{db}/{table}          JSON Store
//	{prefix}/derived/reports/{db}/{table}/{node}  JSON Report
//
// What this package does not do: fetching and applying files
// (internal/bulkload), HTTP (internal/api), reads (internal/api with the
// table Resolve returns).
package derived
