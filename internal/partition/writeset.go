package partition

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Op is the effect of a write set on one document.
type Op uint8

const (
	OpInsert Op = 1 + iota
	OpUpdate
	OpDelete
	// OpDrop is a table's drop (see Replica.Drop): a write without key or
	// images, whose deletions are the write set's index ranges.
	OpDrop
	// OpReplace is a replace load's swap (see Replica.ReplaceChunk): a
	// write without key or images saying the table's documents in the
	// partition are, from its SCN on, those of the load's file.
	OpReplace
)

func (o Op) String() string {
	switch o {
	case OpInsert:
		return "insert"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpDrop:
		return "drop"
	case OpReplace:
		return "replace"
	}
	return fmt.Sprintf("op(%d)", o)
}

// WriteSet is what evaluation of one request produces and replication
// carries: the net effect on every touched document, with pre- and
// post-images, applied atomically at one SCN. It is also, verbatim, the
// partition's change-log entry for that SCN. Apply needs nothing but the
// write set, so followers apply it mechanically.
type WriteSet struct {
	// Mtime is the commit time chosen by the evaluator, Unix milliseconds.
	Mtime int64
	// Writes are in the order the request first touched each document; the
	// last one ends the transaction.
	Writes []Write
	// Counters are auto-increment high-water marks advanced by the request.
	Counters []Counter
	// Index is the secondary-index maintenance of the request: entries to
	// put and delete, applied in the same batch as the documents. It is
	// replicated but not part of the change log.
	Index IndexWrites
	// Upkeep marks a write set of index upkeep only: it folds pending text
	// index entries into a segment, or purges dead postings (see fold.go),
	// and changes no document and no query's answer. It is part of the
	// change-log entry.
	Upkeep bool
	// Ingest asks the replicator to apply the write set as one ingested
	// sstable (ApplyIngest) rather than a batch: the same effects, cheaper
	// for many documents.
	Ingest bool
	// Load, when not nil, makes the write set a chunk of a bulk load (see
	// load.go): it applies only where the partition's mark for the load
	// is Load.From (see Applies), and records Load.To.
	Load *LoadStep
	// Outcomes are the idempotency outcomes the write set remembers and
	// forgets (see idempotency.go); like Index, replicated but not part of
	// the change log.
	Outcomes OutcomeWrites

	// logLen is the length of the encoding's change-log part (everything
	// but Index), set by Encode and DecodeWriteSet.
	logLen int
}

// IndexWrites are index entries to put, to delete, and key ranges to clear.
type IndexWrites struct {
	Puts    []IndexEntry
	Deletes [][]byte
	Ranges  []KeyRange
}

// IndexEntry is one index key and its posting data.
type IndexEntry struct{ Key, Value []byte }

// KeyRange is [Start, End).
type KeyRange struct{ Start, End []byte }

func (x IndexWrites) empty() bool { return len(x.Puts)+len(x.Deletes)+len(x.Ranges) == 0 }

// Write is the net change of one document.
type Write struct {
	Table         string
	Key           []byte // encoded full key tuple
	Op            Op
	BeforeVersion uint32 // schema version of Before; 0 when absent
	Before        []byte // Avro pre-image; nil on insert
	AfterVersion  uint32
	After         []byte // Avro post-image; nil on delete
}

// Counter is the last auto-increment value handed out in a collection.
type Counter struct {
	Table      string
	Collection []byte // encoded leading key parts
	Value      int64
}

// Size is an estimate of the encoded size, for limits.
func (ws *WriteSet) Size() int {
	n := 16
	if ws.Load != nil {
		n += len(ws.Load.From.Load) + 48
	}
	for _, w := range ws.Writes {
		n += len(w.Table) + len(w.Key) + len(w.Before) + len(w.After) + 16
	}
	for _, c := range ws.Counters {
		n += len(c.Table) + len(c.Collection) + 12
	}
	for _, e := range ws.Index.Puts {
		n += len(e.Key) + len(e.Value) + 4
	}
	for _, k := range ws.Index.Deletes {
		n += len(k) + 2
	}
	for _, r := range ws.Index.Ranges {
		n += len(r.Start) + len(r.End) + 4
	}
	return n + ws.Outcomes.size()
}

// writeSetFormat 2 stores a pre-image as its difference from the
// post-image (see appendImage); format 1 stored both whole, and is still
// read. Format 3 is format 2 with a flags byte after the counters (bit 0:
// Upkeep, bit 1: Ingest, bit 2: Load, whose step follows the byte),
// written only when a flag is set. After the change-log part come the
// index writes, when there are any or outcomes follow, then the outcomes,
// when there are any.
const (
	writeSetFormat      = 2
	writeSetFormatV1    = 1
	writeSetFormatFlags = 3
)

const (
	flagUpkeep = 1 << iota
	flagIngest
	flagLoad
)

func (ws *WriteSet) flags() byte {
	var f byte
	if ws.Upkeep {
		f |= flagUpkeep
	}
	if ws.Ingest {
		f |= flagIngest
	}
	if ws.Load != nil {
		f |= flagLoad
	}
	return f
}

// Encode returns the binary form of ws. Its first LogLen bytes, alone, are
// the change-log entry: a valid encoding of ws without Index.
func (ws *WriteSet) Encode() []byte { return ws.AppendEncoding(nil) }

// AppendEncoding appends the encoding Encode returns to dst, growing dst
// at most once (the replication layer frames it without another copy).
func (ws *WriteSet) AppendEncoding(dst []byte) []byte {
	start := len(dst)
	b := slices.Grow(dst, ws.Size())
	flags := ws.flags()
	if flags != 0 {
		b = append(b, writeSetFormatFlags)
	} else {
		b = append(b, writeSetFormat)
	}
	b = binary.AppendVarint(b, ws.Mtime)
	b = binary.AppendUvarint(b, uint64(len(ws.Writes)))
	for _, w := range ws.Writes {
		b = appendBytes(b, []byte(w.Table))
		b = appendBytes(b, w.Key)
		b = append(b, byte(w.Op))
		b = binary.AppendUvarint(b, uint64(w.AfterVersion))
		b = appendBytes(b, w.After)
		b = binary.AppendUvarint(b, uint64(w.BeforeVersion))
		b = appendImage(b, w.Before, w.After)
	}
	b = binary.AppendUvarint(b, uint64(len(ws.Counters)))
	for _, c := range ws.Counters {
		b = appendBytes(b, []byte(c.Table))
		b = appendBytes(b, c.Collection)
		b = binary.AppendVarint(b, c.Value)
	}
	if flags != 0 {
		b = append(b, flags)
	}
	if ws.Load != nil {
		b = ws.Load.appendTo(b)
	}
	ws.logLen = len(b) - start
	if ws.Index.empty() && ws.Outcomes.empty() {
		return b
	}
	b = binary.AppendUvarint(b, uint64(len(ws.Index.Puts)))
	for _, e := range ws.Index.Puts {
		b = appendBytes(b, e.Key)
		b = appendBytes(b, e.Value)
	}
	b = binary.AppendUvarint(b, uint64(len(ws.Index.Deletes)))
	for _, k := range ws.Index.Deletes {
		b = appendBytes(b, k)
	}
	b = binary.AppendUvarint(b, uint64(len(ws.Index.Ranges)))
	for _, r := range ws.Index.Ranges {
		b = appendBytes(b, r.Start)
		b = appendBytes(b, r.End)
	}
	if ws.Outcomes.empty() {
		return b
	}
	return appendOutcomes(b, ws.Outcomes)
}

// LogLen is the length of the change-log part of the last Encode (or of
// the decoded bytes).
func (ws *WriteSet) LogLen() int { return ws.logLen }

var errCorrupt = errors.New("corrupt write set")

// DecodeWriteSet parses the output of Encode.
func DecodeWriteSet(b []byte) (*WriteSet, error) {
	d := decoder{b: b}
	format := d.byte()
	if format != writeSetFormat && format != writeSetFormatV1 && format != writeSetFormatFlags {
		return nil, errCorrupt
	}
	ws := &WriteSet{Mtime: d.varint()}
	n := d.uvarint()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	ws.Writes = make([]Write, n)
	for i := range ws.Writes {
		w := &ws.Writes[i]
		w.Table = string(d.bytes())
		w.Key = d.bytes()
		w.Op = Op(d.byte())
		if format == writeSetFormatV1 {
			w.BeforeVersion = uint32(d.uvarint())
			w.Before = d.bytes()
			w.AfterVersion = uint32(d.uvarint())
			w.After = d.bytes()
			continue
		}
		w.AfterVersion = uint32(d.uvarint())
		w.After = d.bytes()
		w.BeforeVersion = uint32(d.uvarint())
		w.Before = d.image(w.After)
	}
	n = d.uvarint()
	if n > uint64(len(b)) {
		return nil, errCorrupt
	}
	ws.Counters = make([]Counter, n)
	for i := range ws.Counters {
		c := &ws.Counters[i]
		c.Table = string(d.bytes())
		c.Collection = d.bytes()
		c.Value = d.varint()
	}
	if format == writeSetFormatFlags {
		flags := d.byte()
		if flags&^(flagUpkeep|flagIngest|flagLoad) != 0 {
			return nil, errCorrupt
		}
		ws.Upkeep = flags&flagUpkeep != 0
		ws.Ingest = flags&flagIngest != 0
		if flags&flagLoad != 0 {
			ws.Load = d.loadStep()
		}
	}
	ws.logLen = len(b) - len(d.b)
	if d.err == nil && len(d.b) > 0 {
		ws.Index = d.indexWrites(len(b))
	}
	if d.err == nil && len(d.b) > 0 {
		ws.Outcomes = d.outcomes(len(b))
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return ws, nil
}

func (d *decoder) indexWrites(limit int) IndexWrites {
	var x IndexWrites
	count := func() int {
		n := d.uvarint()
		if n > uint64(limit) {
			d.fail()
			return 0
		}
		return int(n)
	}
	x.Puts = make([]IndexEntry, count())
	for i := range x.Puts {
		x.Puts[i] = IndexEntry{Key: d.bytes(), Value: d.bytes()}
	}
	x.Deletes = make([][]byte, count())
	for i := range x.Deletes {
		x.Deletes[i] = d.bytes()
	}
	x.Ranges = make([]KeyRange, count())
	for i := range x.Ranges {
		x.Ranges[i] = KeyRange{Start: d.bytes(), End: d.bytes()}
	}
	return x
}

// MtimeOf reads only the commit time of an encoded write set.
func MtimeOf(b []byte) int64 {
	d := decoder{b: b}
	d.byte()
	return d.varint()
}

// appendImage writes a pre-image as what it does not share with the
// post-image: the lengths of their common prefix and of their common suffix
// after it, and the bytes between. An update that changes one field of a
// document writes about that field, not the document again, in the Raft
// log and again in the change log.
// nil (no pre-image) is a zero.
func appendImage(b, before, after []byte) []byte {
	if before == nil {
		return append(b, 0)
	}
	n := min(len(before), len(after))
	prefix := 0
	for prefix < n && before[prefix] == after[prefix] {
		prefix++
	}
	suffix := 0
	for suffix < n-prefix && before[len(before)-1-suffix] == after[len(after)-1-suffix] {
		suffix++
	}
	b = binary.AppendUvarint(b, uint64(prefix)+1)
	b = binary.AppendUvarint(b, uint64(suffix))
	return appendBytes(b, before[prefix:len(before)-suffix])
}

// appendBytes writes a length-prefixed byte string; nil and empty differ
// (length+1, 0 = nil) because a nil image means "absent".
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(v))+1)
	return append(b, v...)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// skip consumes the n bytes a varint read took; n <= 0 means the read
// failed, which fails the decoder.
func (d *decoder) skip(n int) bool {
	if n <= 0 {
		d.fail()
		return false
	}
	d.b = d.b[n:]
	return true
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if !d.skip(n) {
		return 0
	}
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if !d.skip(n) {
		return 0
	}
	return v
}

// image reads what appendImage wrote against the post-image after.
func (d *decoder) image(after []byte) []byte {
	p := d.uvarint()
	if p == 0 {
		return nil
	}
	prefix, suffix := p-1, d.uvarint()
	middle := d.bytes()
	if middle == nil || prefix > uint64(len(after)) || suffix > uint64(len(after))-prefix {
		d.fail()
		return nil
	}
	if prefix == 0 && suffix == 0 {
		return middle
	}
	v := make([]byte, 0, int(prefix)+len(middle)+int(suffix))
	v = append(v, after[:prefix]...)
	v = append(v, middle...)
	return append(v, after[uint64(len(after))-suffix:]...)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	if v == nil {
		v = []byte{}
	}
	return v
}
