package node

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/doppio-db/doppio/internal/buildinfo"
	"github.com/doppio-db/doppio/internal/keys"
	"github.com/doppio-db/doppio/internal/storage"
)

// storeFormat is the version of the layout of what a node stores that this
// binary reads and writes: keys, records, index entries (segments), Raft
// entries and change-log entries (write-set format 3). A change that a
// binary of the version before could not read correctly bumps it; a node
// refuses to start on a store of a format newer than its own, rather than
// misread it (a node of a version before this guard existed does not check,
// and must not be started on a store a newer one has written: see
// docs/design/operations.md, "Upgrades: the store's format").
//
//	1: the first format recorded (2026-11-26): write-set format 3, text
//	   index segments.
//	2: remembered idempotency outcomes: the outcome section after a write
//	   set's index part, and the partition section 'o'.
//
// The value lives in buildinfo, which reports it with the version.
const storeFormat = buildinfo.StoreFormat

// storeFormatKey is the node-wide key holding the store's format.
var storeFormatKey = keys.Node("format")

// checkStoreFormat records this binary's format in a store that has none
// (new, or written before formats were recorded), and refuses a store of a
// newer format.
func checkStoreFormat(e *storage.Engine, dir string) error {
	v, err := e.Get(storeFormatKey)
	if errors.Is(err, storage.ErrNotFound) {
		b := e.NewBatch()
		b.Set(storeFormatKey, binary.AppendUvarint(nil, storeFormat))
		return e.Commit(b)
	}
	if err != nil {
		return err
	}
	format, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) {
		return fmt.Errorf("data directory %s: unreadable store format %x", dir, v)
	}
	if format > storeFormat {
		return fmt.Errorf("data directory %s was written by a newer version of Doppio (store format %d; this binary reads format %d at most): start the newer version on it", dir, format, storeFormat)
	}
	return nil
}
