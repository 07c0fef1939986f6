package index

import (
	"encoding/base64"
	"encoding/binary"
	"hash/fnv"

	"github.com/doppio-db/doppio/internal/problem"
)

// A cursor is the position of the last result of a page, so the next page
// starts strictly after it. It is opaque to clients: base64url of
//
//	version(1) phase(1) uint32(hash of the sort) [uvarint(len) value] key
//
// phase 0 is document key order (no sort), 1 a sorted position (the sort
// value then the document key), 2 the documents without a sort value, which
// come last in key order. A position, not an offset: inserts and deletes
// before it do not shift the next page.
//
// Version 1 is a cursor of Execute (one document group): key is the
// document key after the partition key. Version 2 is a cursor of ExecuteAll
// and Merge (every group of every partition): key is the whole encoded
// document key, partition key first. Neither is accepted for the other.
type cursor struct {
	phase byte
	value []byte // phase 1: the encoded sort value
	rest  []byte // the document key after the partition key (version 1), or the whole key (version 2)
}

const (
	cursorVersion    = 1
	cursorVersionAll = 2

	phaseKey     = 0
	phaseSorted  = 1
	phaseMissing = 2
)

func sortHash(s Sort) uint32 {
	h := fnv.New32a()
	h.Write([]byte(s.String()))
	return h.Sum32()
}

func (c cursor) encode(s Sort, version byte) string {
	b := []byte{version, c.phase}
	b = binary.BigEndian.AppendUint32(b, sortHash(s))
	if c.phase == phaseSorted {
		b = binary.AppendUvarint(b, uint64(len(c.value)))
		b = append(b, c.value...)
	}
	b = append(b, c.rest...)
	return base64.RawURLEncoding.EncodeToString(b)
}

func badCursor(reason string) error {
	return problem.Field(problem.Malformed, "cursor", "cursor: %s; pass the cursor of the previous page unchanged, with the same query and sort", reason)
}

func decodeCursor(s string, srt Sort, version byte) (cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 6 || (b[0] != cursorVersion && b[0] != cursorVersionAll) {
		return cursor{}, badCursor("not a cursor")
	}
	switch {
	case b[0] == version:
	case version == cursorVersion:
		return cursor{}, badCursor("it was made for a query without a partition key")
	default:
		return cursor{}, badCursor("it was made for a query of one partition key")
	}
	c := cursor{phase: b[1]}
	if binary.BigEndian.Uint32(b[2:6]) != sortHash(srt) {
		return cursor{}, badCursor("it was made for another sort")
	}
	b = b[6:]
	switch {
	case c.phase == phaseKey && srt.Field == "":
	case c.phase == phaseSorted && srt.Field != "":
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return cursor{}, badCursor("not a cursor")
		}
		c.value, b = b[k:k+int(n)], b[k+int(n):]
		if l, err := valueLen(c.value); err != nil || l != len(c.value) {
			return cursor{}, badCursor("not a cursor")
		}
	case c.phase == phaseMissing && srt.Field != "":
	default:
		return cursor{}, badCursor("not a cursor")
	}
	c.rest = b
	if version == cursorVersionAll {
		// The whole key starts with the partition key.
		if n, err := valueLen(b); err != nil || n == 0 {
			return cursor{}, badCursor("not a cursor")
		}
	}
	return c, nil
}
