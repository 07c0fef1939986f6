package cache

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/doppio-db/doppio/internal/scn"
)

// Entry is one document in the cache tier, or the tombstone of a deleted
// one, as of SCN.
type Entry struct {
	// SCN is the SCN of the write set that last wrote the document; for a
	// tombstone, the delete's SCN or the SCN a partition had applied when
	// it found no document.
	SCN scn.SCN
	// AsOf is a time (Unix ms) at which this state was the latest.
	AsOf int64
	// Version is the schema version of Data; 0 marks a tombstone.
	Version uint32
	// Data is the document's Avro bytes as stored (written with Version).
	Data []byte
	// Mtime is the document's modification time, Unix ms.
	Mtime int64
	// Epoch is, for an entry read from Redis, when the incarnation that
	// holds it began vouching (Unix ms; see Vouched); 0 elsewhere.
	Epoch int64
}

// Tombstone reports whether the entry says the document does not exist.
func (e Entry) Tombstone() bool { return e.Version == 0 }

// Vouched is the watermark that may vouch for the entry: watermark,
// unless the entry's state predates its incarnation's epoch by less than
// skew (the clocks' disagreement), then 0. Such an entry (loaded from a
// file, or a change replayed into a new incarnation) may miss a change the
// watermark counts as applied to the incarnation before; its own AsOf
// still holds.
func (e Entry) Vouched(watermark int64, skew time.Duration) int64 {
	if e.AsOf < e.Epoch || e.AsOf-e.Epoch < skew.Milliseconds() {
		return 0
	}
	return watermark
}

// Age is the entry's age bound at now given its partition's watermark
// (Unix ms): how old the state it shows may be.
func (e Entry) Age(now time.Time, watermark int64) time.Duration {
	return now.Sub(time.UnixMilli(max(e.AsOf, watermark)))
}

// Ref names one entry and its partition.
type Ref struct {
	DB string
	// Generation is the table's cache generation from the catalog.
	Generation int64
	Table      string
	Partition  int
	// Key is the document's encoded key tuple (keys.EncodeTuple).
	Key []byte
}

// EntryKey is the Redis key of the entry:
// doppio:{db}:{generation}:{table}:{base64url of the key}.
func (r Ref) EntryKey() string {
	b := make([]byte, 0, len(r.DB)+len(r.Table)+base64.RawURLEncoding.EncodedLen(len(r.Key))+32)
	b = append(b, "doppio:"...)
	b = append(b, r.DB...)
	b = append(b, ':')
	b = strconv.AppendInt(b, r.Generation, 10)
	b = append(b, ':')
	b = append(b, r.Table...)
	b = append(b, ':')
	b = base64.RawURLEncoding.AppendEncode(b, r.Key)
	return string(b)
}

// WatermarkKey is the Redis key of the partition's watermark.
func (r Ref) WatermarkKey() string { return WatermarkKey(r.DB, r.Generation, r.Partition) }

// WatermarkKey is the Redis key of a partition's watermark for the tables
// of one cache generation: doppio:{db}:{generation}:wm:{partition}.
func WatermarkKey(db string, generation int64, partition int) string {
	return "doppio:" + db + ":" + strconv.FormatInt(generation, 10) + ":wm:" + strconv.Itoa(partition)
}

// TablePattern is the Redis key pattern (for SCAN) of every entry of a
// table of one generation. Table names are identifiers, so the pattern
// needs no escaping; only a table named "wm" also matches the
// generation's watermark keys, which are strings, not hashes.
func TablePattern(db string, generation int64, table string) string {
	return "doppio:" + db + ":" + strconv.FormatInt(generation, 10) + ":" + table + ":*"
}

// DecodeKey returns the encoded key tuple of an entry's Redis key of the
// given table pattern's prefix (TablePattern without the "*").
func DecodeKey(prefix, redisKey string) ([]byte, bool) {
	if len(redisKey) < len(prefix) || redisKey[:len(prefix)] != prefix {
		return nil, false
	}
	k, err := base64.RawURLEncoding.DecodeString(redisKey[len(prefix):])
	return k, err == nil
}
