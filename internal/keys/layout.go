package keys

import (
	"bytes"
	"encoding/binary"
)

// Storage layout. Every byte of a partition lives under its prefix, so a
// snapshot is a range scan, a drop is a range delete and a bulk load is an
// ingest into that range:
//
//	partition prefix  = 'p' string(db) int(partition)
//	document          = prefix 'd' string(table) tuple(key)           -> record
//	auto-increment    = prefix 'a' string(table) tuple(collection)    -> uint64 last value
//	change log        = prefix 'l' uint64(generation) uint64(sequence) -> log entry
//	index entry       = prefix 'i' string(table) tuple(partition key) string(field) value tuple(rest of key) -> posting data
//	partition meta    = prefix 'm' string(name)                        -> value
//	outcome           = prefix 'o' 'k' scope uint64(expires ms)        -> remembered outcome
//	outcome expiry    = prefix 'o' 't' uint64(expires ms) scope        -> empty
//
// Node-wide keys (outside any partition) start with 'n'.
const (
	spacePartition byte = 'p'
	spaceNode      byte = 'n'

	sectionDocument byte = 'd'
	sectionAutoInc  byte = 'a'
	sectionLog      byte = 'l'
	sectionMeta     byte = 'm'
	sectionIndex    byte = 'i'
	sectionOutcome  byte = 'o'

	outcomeByScope  byte = 'k'
	outcomeByExpiry byte = 't'
)

// Partition is the key prefix of one partition of one database.
type Partition []byte

// PartitionPrefix returns the prefix under which partition p of db lives.
func PartitionPrefix(db string, p int) Partition {
	b := AppendString([]byte{spacePartition}, db)
	return Partition(AppendInt(b, int64(p)))
}

func (p Partition) section(s byte, extra int) []byte {
	b := make([]byte, 0, len(p)+1+extra)
	b = append(b, p...)
	return append(b, s)
}

// Table returns the prefix of every document of table in this partition.
func (p Partition) Table(table string) []byte {
	return AppendString(p.section(sectionDocument, len(table)+3), table)
}

// Document returns the key of the document (or collection prefix, when key
// holds only leading parts) of table.
func (p Partition) Document(table string, key []byte) []byte {
	return append(AppendString(p.section(sectionDocument, len(table)+3+len(key)), table), key...)
}

// AutoIncrement returns the key holding the last auto-increment value handed
// out in the collection whose encoded leading key parts are collection.
func (p Partition) AutoIncrement(table string, collection []byte) []byte {
	b := AppendString(p.section(sectionAutoInc, len(table)+len(collection)+3), table)
	return append(b, collection...)
}

// IndexTable returns the prefix of every index entry of table.
func (p Partition) IndexTable(table string) []byte {
	return AppendString(p.section(sectionIndex, len(table)+3), table)
}

// Index returns the prefix of the index entries of field (a dotted path) in
// the document group whose encoded partition key is group: the Prefix Index
// of the Espresso paper, one list per (table, collection, field). An entry
// appends the encoded value or term, then the document key's encoded parts
// after the partition key.
func (p Partition) Index(table string, group []byte, field string) []byte {
	b := AppendString(p.section(sectionIndex, len(table)+3+len(group)+len(field)+3), table)
	return AppendString(append(b, group...), field)
}

// LogPrefix returns the prefix of the partition's change log.
func (p Partition) LogPrefix() []byte { return p.section(sectionLog, 16) }

// Log returns the change-log key of SCN (generation, sequence).
func (p Partition) Log(generation, sequence uint64) []byte {
	b := binary.BigEndian.AppendUint64(p.LogPrefix(), generation)
	return binary.BigEndian.AppendUint64(b, sequence)
}

// ParseLog returns the SCN encoded in a change-log key of this partition.
func (p Partition) ParseLog(key []byte) (generation, sequence uint64, ok bool) {
	n := len(p) + 1
	if len(key) != n+16 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint64(key[n:]), binary.BigEndian.Uint64(key[n+8:]), true
}

// Meta returns the key of the partition metadata item name.
func (p Partition) Meta(name string) []byte {
	return AppendString(p.section(sectionMeta, len(name)+3), name)
}

// MetaPrefix returns the prefix of every partition metadata key.
func (p Partition) MetaPrefix() []byte { return p.section(sectionMeta, 0) }

// Outcomes returns the prefix of the remembered outcomes of one
// idempotency scope (a tuple-encoded principal, key and part), which sort
// by expiry: the last one is the newest.
func (p Partition) Outcomes(scope []byte) []byte {
	b := append(p.section(sectionOutcome, 1+len(scope)+8), outcomeByScope)
	return append(b, scope...)
}

// Outcome returns the key of the outcome of scope that expires at
// expires (Unix milliseconds).
func (p Partition) Outcome(scope []byte, expires int64) []byte {
	return binary.BigEndian.AppendUint64(p.Outcomes(scope), uint64(expires))
}

// OutcomeExpiryPrefix returns the prefix of the outcomes' expiry index,
// in which a purge finds the outcomes expired by a time.
func (p Partition) OutcomeExpiryPrefix() []byte {
	return append(p.section(sectionOutcome, 1), outcomeByExpiry)
}

// OutcomeExpiry returns the expiry index key of the outcome of scope that
// expires at expires.
func (p Partition) OutcomeExpiry(expires int64, scope []byte) []byte {
	b := binary.BigEndian.AppendUint64(p.OutcomeExpiryPrefix(), uint64(expires))
	return append(b, scope...)
}

// OutcomePrefix returns the prefix of every outcome key of the partition.
func (p Partition) OutcomePrefix() []byte { return p.section(sectionOutcome, 0) }

// End returns the first key after the partition.
func (p Partition) End() []byte { return PrefixEnd(p) }

// Node returns a node-wide metadata key.
func Node(name string) []byte { return AppendString([]byte{spaceNode}, name) }

// DocumentPrefix returns the prefix of every document of the partition.
func (p Partition) DocumentPrefix() []byte { return p.section(sectionDocument, 0) }

// AutoIncrementPrefix returns the prefix of every auto-increment counter.
func (p Partition) AutoIncrementPrefix() []byte { return p.section(sectionAutoInc, 0) }

// IndexPrefix returns the prefix of every index entry of the partition.
func (p Partition) IndexPrefix() []byte { return p.section(sectionIndex, 0) }

// DataSpans are the spans of the partition that hold its data: everything
// but the Raft section (below and above it). A snapshot or a backup
// carries exactly these.
func (p Partition) DataSpans() [][2][]byte {
	rp := p.Raft()
	return [][2][]byte{{p, rp}, {PrefixEnd(rp), p.End()}}
}

// IsDocument reports whether key is a document key of some partition
// (what a node's row cache keeps).
func IsDocument(key []byte) bool {
	i := sectionAt(key)
	return i >= 0 && key[i] == sectionDocument
}

// MayHoldDocuments reports whether the span [start, end) may hold a
// document key: false only when both ends lie in one partition section
// other than the documents' (a span of the Raft log, of the change log),
// which then holds every key between them.
func MayHoldDocuments(start, end []byte) bool {
	i := sectionAt(start)
	if i < 0 || len(end) <= i || !bytes.Equal(start[:i+1], end[:i+1]) {
		return true
	}
	return start[i] == sectionDocument
}

// sectionAt returns the position of the section byte of a key under a
// partition prefix, or -1 when key has none.
func sectionAt(key []byte) int {
	if len(key) < 2 || key[0] != spacePartition || key[1] != tagString {
		return -1
	}
	for i := 2; i+1 < len(key); i++ {
		if key[i] != 0 {
			continue
		}
		if key[i+1] == 0xFF {
			i++
			continue
		}
		// End of the database name: then the partition number and the section.
		n := i + 2
		if len(key) > n+9 && key[n] == tagInt {
			return n + 9
		}
		return -1
	}
	return -1
}
