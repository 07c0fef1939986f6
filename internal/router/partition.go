// Package router holds the partition function until it moves to keys.
package router

import (
	"github.com/cespare/xxhash/v2"
	"github.com/doppio-db/doppio/internal/schema"
)

// PartitionOf is the partition of db holding the document group whose
// encoded partition key is pk. Only hash partitioning exists today; the
// database's partitioner names the function, so range partitioning can be
// added without touching callers.
func PartitionOf(db schema.Database, pk []byte) int {
	return int(xxhash.Sum64(pk) % uint64(db.Partitions))
}
