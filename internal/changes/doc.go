// Package changes turns partitions' change logs into the change stream: the
// events of committed transactions in commit order per partition, with
// pre- and post-images and transaction boundaries, and the checkpoints that
// resume a stream exactly after the last event read.
//
// A partition's change log is replicated with its data (one entry per
// committed transaction, keyed by SCN, written in the same batch as the
// documents), so every replica holds the same timeline and any replica can
// serve it; a stream moves between replicas without gap or duplicate by
// resuming from its position. The sequence part of an SCN counts committed
// transactions and has no gaps, which lets a reader prove it missed
// nothing: an entry whose sequence is not the next one means the log was
// trimmed past the reader's position (ErrTrimmed: bootstrap again).
//
// What this package does not do: HTTP framing, choosing a replica, and
// merging partitions (internal/api); consuming the stream (client/changes).
package changes
