package keys

import "github.com/cespare/xxhash/v2"

// PartitionOf is the partition, of a database hash-partitioned into
// partitions, holding the document group whose encoded partition key is pk
// (EncodeTuple of the key's partition part). Only hash partitioning exists
// today; the function lives here, below the schema and the router, so the
// public client routes with it without linking the server.
func PartitionOf(pk []byte, partitions int) int {
	return int(xxhash.Sum64(pk) % uint64(partitions))
}
